"""The README's Python program runs as written (one epoch instead of five, to keep the suite short),
under whichever numpy is installed (the venv check runs it with numpy 2)."""
import os
import re

import pytest

FASHION = "/usr/share/datasets/fashion-mnist"


@pytest.mark.skipif(not os.path.isdir(FASHION), reason="dataset-fashion-mnist not installed")
def test_readme_python_program_trains(root_dir, capfd):
    readme = open(os.path.join(root_dir, "README.md")).read()
    blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
    program = next(b for b in blocks if "import spore as ms" in b and "model.train(" in b)
    assert "model.train(5," in program
    exec(compile(program.replace("model.train(5,", "model.train(1,"), "README.md", "exec"), {})
    out = capfd.readouterr().out
    losses = [float(x) for x in re.findall(r"loss is ([0-9.]+)", out)]
    assert len(losses) >= 9, out  # LossMonitor(100) over 938 steps
    assert losses[-1] < 1.0 < losses[0], losses  # it learns
