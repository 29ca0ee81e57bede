// Fibers for the emulated threads: each has its own stack, and a barrier switches back to the
// block's scheduler, which resumes the threads in turn and releases a barrier once every live
// thread it concerns has arrived. The switch is a few instructions of x86-64 assembly (the
// callee-saved registers, the stack pointer, the SSE and x87 control words), far cheaper than
// swapcontext's system call: a kernel launch runs hundreds of thousands of threads.
#include "tests/cuda/emu/engine.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <sstream>
#include <vector>

#if !defined(__x86_64__)
#error "the CUDA emulator's fibers are written for x86-64"
#endif

extern "C" void spore_emu_switch(void** save_sp, void* load_sp);
extern "C" void spore_emu_trampoline();

// spore_emu_switch(save, load): pushes the callee-saved state, stores the stack pointer in *save,
// loads `load` and pops the state saved there. A new fiber's stack is laid out as if it had
// switched away just before entering the trampoline, which calls r12(r13) and never returns.
asm(R"(
  .text
  .globl spore_emu_switch
  .hidden spore_emu_switch
  .type spore_emu_switch, @function
spore_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $16, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $16, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size spore_emu_switch, .-spore_emu_switch

  .globl spore_emu_trampoline
  .hidden spore_emu_trampoline
  .type spore_emu_trampoline, @function
spore_emu_trampoline:
  movq %r13, %rdi
  callq *%r12
  ud2
  .size spore_emu_trampoline, .-spore_emu_trampoline
)");

namespace spore::emu {
namespace {

constexpr int kMaxThreads = 1024;      // CUDA's limit per block
constexpr size_t kStack = 256 * 1024;  // per fiber; kernels keep index tables on the stack
constexpr size_t kGuard = 4096;        // an overflow faults instead of corrupting a neighbour

enum class State { kReady, kAtBlockBarrier, kAtWarpBarrier, kDone };

struct Fiber {
  void* sp = nullptr;
  ThreadCtx ctx;
  State state = State::kReady;
  int flat = 0;  // thread index within the block
  // At a barrier: the vote (block) or the value and source-lane rule (warp); the result after.
  int vote = 0;
  uint64_t bits = 0;
  Shuffle mode = Shuffle::kIdx;
  int arg = 0, width = 32;
  uint64_t result = 0;
};

struct Block {
  std::vector<Fiber> fibers;
  int live = 0;
  void* scheduler_sp = nullptr;
  Fiber* running = nullptr;
  const std::function<void()>* body = nullptr;
  int block_kind = 0;  // the voting kind of the current block barrier
};

// One grid runs at a time in the process (the runtime runs queued work under its lock), so the
// block being run and the fiber stacks are plain globals: no thread-local lookup per access.
Block& block() {
  static Block b;
  return b;
}

// Stacks for kMaxThreads fibers, mapped once (lazily committed as the kernels touch them).
char* stacks() {
  static char* base = [] {
    const size_t each = kStack + kGuard;
    void* p = mmap(nullptr, each * kMaxThreads, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return static_cast<char*>(nullptr);
    for (int i = 0; i < kMaxThreads; ++i)
      mprotect(static_cast<char*>(p) + i * each, kGuard, PROT_NONE);
    return static_cast<char*>(p);
  }();
  return base;
}

// Enters through the trampoline: runs the kernel body as this fiber's thread, then hands back.
void fiber_main(void* arg) {
  Block& b = block();
  auto* f = static_cast<Fiber*>(arg);
  (*b.body)();
  f->state = State::kDone;
  --b.live;
  spore_emu_switch(&f->sp, b.scheduler_sp);
  __builtin_unreachable();
}

void start(Fiber& f, int index, unsigned mxcsr_fcw[2]) {
  char* top = stacks() + size_t(index) * (kStack + kGuard) + kGuard + kStack;
  auto* s = reinterpret_cast<uint64_t*>(
      top);  // 16-byte aligned: the trampoline's call sees the ABI's alignment
  s[-1] = reinterpret_cast<uint64_t>(&spore_emu_trampoline);  // "return address"
  s[-2] = 0;                                                  // rbp
  s[-3] = 0;                                                  // rbx
  s[-4] = reinterpret_cast<uint64_t>(&fiber_main);            // r12: the function
  s[-5] = reinterpret_cast<uint64_t>(&f);                     // r13: its argument
  s[-6] = 0;                                                  // r14
  s[-7] = 0;                                                  // r15
  std::memcpy(&s[-9], mxcsr_fcw, 8);                          // control words, as the host's
  f.sp = &s[-9];
}

// From inside a fiber: back to the scheduler until it resumes this fiber.
void yield_to_scheduler() {
  Block& b = block();
  Fiber* f = b.running;
  spore_emu_switch(&f->sp, b.scheduler_sp);
}

int lane_of(const Fiber& f) { return f.flat % 32; }

const char* describe(State s) {
  switch (s) {
    case State::kAtBlockBarrier:
      return "__syncthreads";
    case State::kAtWarpBarrier:
      return "a warp shuffle";
    default:
      return "running";
  }
}

// Releases the block barrier if every live thread waits there; else each warp whose live lanes
// all wait at a shuffle. Returns whether anything was released; sets *error on a broken rule.
bool release(Block& b, std::string* error) {
  // CUDA's rule: __syncthreads is reached by every thread of the block or by none; a thread that
  // has returned while others wait there breaks it.
  bool all_block = b.live > 0, exited = false;
  for (const Fiber& f : b.fibers) {
    if (f.state != State::kDone && f.state != State::kAtBlockBarrier) all_block = false;
    exited |= f.state == State::kDone;
  }
  if (all_block && exited) {
    for (const Fiber& f : b.fibers)
      if (f.state == State::kDone) {
        *error = "the threads disagree on barriers: thread " + std::to_string(f.flat) +
                 " returned while others wait at __syncthreads (CUDA requires every thread of "
                 "the block to reach it, or none)";
        break;
      }
    return false;
  }
  if (all_block) {
    int any = 0, all = 1, count = 0;
    for (const Fiber& f : b.fibers)
      if (f.state == State::kAtBlockBarrier)
        any |= f.vote != 0, all &= f.vote != 0, count += f.vote != 0;
    const int r = b.block_kind == 1 ? any : b.block_kind == 2 ? all : count;
    for (Fiber& f : b.fibers)
      if (f.state == State::kAtBlockBarrier) f.result = uint64_t(r), f.state = State::kReady;
    return true;
  }
  bool released = false;
  const int n = int(b.fibers.size());
  for (int w = 0; w < n; w += 32) {
    const int end = std::min(n, w + 32);
    bool waiting = false, all = true;
    for (int i = w; i < end; ++i) {
      const State s = b.fibers[size_t(i)].state;
      waiting |= s == State::kAtWarpBarrier;
      all &= s == State::kAtWarpBarrier;
    }
    if (!waiting) continue;
    if (!all || end - w < 32) {
      std::ostringstream o;
      o << "a full-mask warp shuffle in warp " << w / 32 << " is missing lanes:";
      for (int i = w; i < w + 32; ++i) {
        if (i >= end) {
          o << " lane " << i - w << " does not exist (the block has " << n << " threads);";
          break;
        }
        const Fiber& f = b.fibers[size_t(i)];
        if (f.state != State::kAtWarpBarrier)
          o << " lane " << i - w << " is " << (f.state == State::kDone ? "done" : describe(f.state))
            << ";";
      }
      *error = o.str();
      return false;
    }
    for (int i = w; i < end; ++i) {
      Fiber& f = b.fibers[size_t(i)];
      const int lane = i - w, seg = lane / f.width * f.width;
      int src = lane;
      switch (f.mode) {
        case Shuffle::kIdx:
          src = seg + ((f.arg % f.width) + f.width) % f.width;
          break;
        case Shuffle::kUp:
          src = lane - f.arg >= seg ? lane - f.arg : lane;
          break;
        case Shuffle::kDown:
          src = lane + f.arg < seg + f.width ? lane + f.arg : lane;
          break;
        case Shuffle::kXor:
          src = (lane ^ f.arg) < seg + f.width && (lane ^ f.arg) >= seg ? lane ^ f.arg : lane;
          break;
      }
      f.result = b.fibers[size_t(w + src)].bits;
    }
    for (int i = w; i < end; ++i) b.fibers[size_t(i)].state = State::kReady;
    released = true;
  }
  return released;
}

std::string where(const char* kernel, const ThreadCtx& t) {
  std::ostringstream o;
  o << kernel << " block (" << t.block_idx.x << "," << t.block_idx.y << "," << t.block_idx.z << ")";
  return o.str();
}

}  // namespace

const ThreadCtx& thread() { return block().running->ctx; }

int sync_block(int kind, int predicate) {
  Block& b = block();
  Fiber* f = b.running;
  f->state = State::kAtBlockBarrier;
  f->vote = predicate;
  b.block_kind = kind;
  yield_to_scheduler();
  return int(f->result);
}

uint64_t shuffle(uint64_t bits, Shuffle mode, int arg, int width) {
  Block& b = block();
  Fiber* f = b.running;
  f->state = State::kAtWarpBarrier;
  f->bits = bits, f->mode = mode, f->arg = arg, f->width = width > 0 && width <= 32 ? width : 32;
  yield_to_scheduler();
  return f->result;
}

bool run_grid(const char* kernel, dim3 grid, dim3 blk, const std::function<void()>& body,
              std::string* error) {
  const uint64_t threads = uint64_t(blk.x) * blk.y * blk.z;
  if (threads == 0 || threads > uint64_t(kMaxThreads) || grid.x == 0 || grid.y == 0 ||
      grid.z == 0) {
    std::ostringstream o;
    o << kernel << ": invalid launch configuration: grid (" << grid.x << "," << grid.y << ","
      << grid.z << "), block (" << blk.x << "," << blk.y << "," << blk.z << ")";
    *error = o.str();
    return false;
  }
  if (!stacks()) {
    *error = "the emulator could not map its fiber stacks";
    return false;
  }
  Block& b = block();
  b.body = &body;
  b.fibers.assign(size_t(threads), Fiber{});
  unsigned control[2] = {0, 0};
  asm volatile("stmxcsr %0" : "=m"(control[0]));
  asm volatile("fnstcw %0" : "=m"(control[1]));
  for (unsigned bz = 0; bz < grid.z; ++bz)
    for (unsigned by = 0; by < grid.y; ++by)
      for (unsigned bx = 0; bx < grid.x; ++bx) {
        int i = 0;
        for (unsigned z = 0; z < blk.z; ++z)
          for (unsigned y = 0; y < blk.y; ++y)
            for (unsigned x = 0; x < blk.x; ++x, ++i) {
              Fiber& f = b.fibers[size_t(i)];
              f = Fiber{};
              f.flat = i;
              f.ctx = ThreadCtx{{x, y, z}, {bx, by, bz}, blk, grid};
              start(f, i, control);
            }
        b.live = int(threads);
        while (b.live > 0) {
          for (Fiber& f : b.fibers) {
            if (f.state != State::kReady) continue;
            b.running = &f;
            spore_emu_switch(&b.scheduler_sp, f.sp);
          }
          b.running = nullptr;
          if (b.live == 0) break;
          std::string why;
          if (!release(b, &why)) {
            if (why.empty()) {  // no barrier complete, none broken: threads wait at different ones
              std::ostringstream o;
              o << "the threads disagree on barriers:";
              for (const Fiber& f : b.fibers)
                if (f.state != State::kDone) {
                  o << " thread " << f.flat << " waits at " << describe(f.state) << ";";
                  if (o.tellp() > 400) break;
                }
              why = o.str();
            }
            *error = where(kernel, b.fibers[0].ctx) + ": " + why;
            return false;  // the stranded fibers are abandoned (their stacks are reused)
          }
        }
      }
  return true;
}

}  // namespace spore::emu
