"""mindspore.Profiler: the C++ profiler (include/spore/profiler.h), the one `spore train
--profile DIR` runs. It records every op PyNative runs, every node a compiled graph runs, the
training steps, data-pipeline work and collectives, and analyse() writes <output_path>/trace.json
(Chrome trace events: open it in https://ui.perfetto.dev or chrome://tracing) and
<output_path>/summary.txt (ops by total time).

    profiler = ms.Profiler(output_path="./prof")
    model.train(1, data)
    profiler.analyse()
"""
from . import _C

# MindSpore options and the one value Spore's profiler matches (it always records these).
_ALWAYS = {"profile_communication": True, "record_shapes": True, "data_process": True}


class Profiler:
    """Starts recording when made (start_profile=True, MindSpore's default) or at start()."""

    def __init__(self, output_path="./data", start_profile=True, **kwargs):
        for key, value in kwargs.items():
            if key in _ALWAYS and bool(value) == _ALWAYS[key]:
                continue  # what Spore's profiler does anyway
            if key in _ALWAYS:
                raise NotImplementedError(f"For 'Profiler', {key}={value!r}: Spore's profiler always records "
                                          f"this (collectives, op shapes and data-pipeline work); drop the argument")
            raise NotImplementedError(
                f"For 'Profiler', the argument {key!r} is not supported: Spore's profiler takes output_path and "
                f"start_profile, and always records ops, graph nodes, steps, data pipeline and collectives "
                f"(no hardware counters, memory or stack options); drop it")
        if not isinstance(output_path, str) or not output_path:
            raise ValueError(f"For 'Profiler', 'output_path' must be a non-empty str, got {output_path!r}")
        self._output_path = output_path
        self._cpp = _C.Profiler(output_path)  # starts recording (one profiler at a time)
        if not start_profile:
            self._cpp.stop()

    def start(self):
        self._cpp.start()

    def stop(self):
        self._cpp.stop()

    def analyse(self, offline_path=None, pretty=False, step_list=None, mode="sync"):
        """Stops recording, writes trace.json and summary.txt into output_path and returns the
        summary text."""
        if offline_path is not None or step_list is not None or mode != "sync":
            raise NotImplementedError("For 'Profiler.analyse', offline_path, step_list and mode='async' are not "
                                      "supported: Spore analyses the recording it holds, every step, now")
        summary = self._cpp.analyse()
        if pretty:  # MindSpore's pretty: indented JSON
            import json
            import os
            path = os.path.join(self._output_path, "trace.json")
            with open(path) as f:
                trace = json.load(f)
            with open(path, "w") as f:
                json.dump(trace, f, indent=1)
        return summary
