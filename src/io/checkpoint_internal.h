// Test hooks for the checkpoint writer: simulate a failure at one stage of save_checkpoint, so
// tests can check that a failed save removes its temp file and leaves the previous file intact.
#pragma once

namespace spore::io::detail {

enum class SaveFault { None, AfterHeader, BeforeRename };
void set_save_fault(SaveFault f);  // applies to the next save_checkpoint only

}  // namespace spore::io::detail
