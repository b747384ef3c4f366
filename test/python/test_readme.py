"""The README's commands work as written (issue 12: every command in it is run by a test).

- `$ cmd` transcripts in ```sh blocks are replayed in a scratch directory: `$ cat F`
  followed by text creates F; any other command runs and its stdout + stderr must be
  the text that follows it.
- The other ```sh blocks are command lists. The two main commands are checked to exist
  (CI runs the test one itself; the demo that `tools/demo.sh` runs after setup runs
  here with the same interpreter). For each other command, every flag it names must be
  one its `--help` lists, and the cheap ones run for real at a reduced count.
- The ```python block that prints a report runs as written.
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
README = os.path.join(ROOT, "README.md")
BIN = os.path.dirname(sys.executable)


def _blocks(lang: str) -> list[str]:
    text = open(README, encoding="utf-8").read()
    return re.findall(rf"^```{lang}\n(.*?)^```", text, flags=re.S | re.M)


def _transcripts():
    """[(commands before it, command, expected output)] of every `$` transcript."""
    out = []
    for block in _blocks("sh"):
        if not block.startswith("$ "):
            continue
        steps, cur = [], None
        for line in block.splitlines():
            if line.startswith("$ "):
                cur = [line[2:], []]
                steps.append(cur)
            else:
                cur[1].append(line)
        out.append([(c, "\n".join(o)) for c, o in steps])
    return out


def _env():
    env = dict(os.environ)
    env["PATH"] = BIN + os.pathsep + env.get("PATH", "")
    env.pop("STAX_DEBUG", None)
    return env


def test_readme_has_the_two_commands_and_ci_runs_the_test_one():
    (first,) = [b for b in _blocks("sh") if "tools/demo.sh" in b]
    cmds = [ln.split("#")[0].strip() for ln in first.splitlines() if ln.strip()]
    assert cmds == ["bash tools/demo.sh", "bash tools/run_tests.sh"], cmds
    for c in cmds:
        assert os.path.isfile(os.path.join(ROOT, c.split()[1]))
    assert "tools/run_tests.sh" in open(os.path.join(ROOT, ".ci/run")).read()


def test_readme_stax_opt_transcripts_are_what_stax_opt_prints(tmp_path):
    files: dict[str, str] = {}
    ran = 0
    for steps in _transcripts():
        for cmd, expected in steps:
            argv = shlex.split(cmd)
            if argv[0] == "cat":
                files[argv[1]] = expected + "\n"
                continue
            for name, text in files.items():
                (tmp_path / name).write_text(text)
            p = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True,
                               env=_env(), timeout=120)
            got = (p.stdout + p.stderr).rstrip("\n")
            assert got == expected, f"README: $ {cmd}\n--- expected\n{expected}\n--- got\n{got}"
            # the README says errors exit 1
            assert p.returncode == (1 if "error:" in expected else 0), (cmd, p.returncode)
            ran += 1
    assert ran >= 3


def _flags(cmd: str) -> list[str]:
    return [t.split("=")[0] for t in re.findall(r"--[a-z][\w-]*(?:=\S+)?", cmd)]


def _help(argv0: list[str]) -> str:
    p = subprocess.run(argv0 + ["--help"], cwd=ROOT, capture_output=True, text=True,
                       env=_env(), timeout=120)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_readme_correctness_commands_take_the_flags_they_show():
    (block,) = [b for b in _blocks("sh") if "stax-fuzz" in b]
    cmds = [ln.split("#")[0].strip() for ln in block.splitlines()
            if ln.strip() and not ln.startswith("source ")]
    assert cmds
    for c in cmds:
        argv = shlex.split(c.replace("[", "").replace("]", ""))
        argv0 = argv[:2] if argv[0] == "python" else argv[:1]
        argv0 = [sys.executable] + argv0[1:] if argv0[0] == "python" else \
            [os.path.join(BIN, argv0[0])]
        helptext = _help(argv0)
        for flag in _flags(c):
            assert flag in helptext, f"README command {c!r}: {flag} is not an option"
    # the fuzzer runs for real as shown, at a reduced count
    p = subprocess.run([os.path.join(BIN, "stax-fuzz"), "--seed", "1", "--count", "3"],
                       cwd=ROOT, capture_output=True, text=True, env=_env(), timeout=300)
    assert p.returncode == 0 and "3 passed, 0 failed" in p.stdout, p.stdout + p.stderr


def test_readme_report_example_runs():
    (code,) = [b for b in _blocks("python") if "stax.explain" in b]
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                       text=True, env=_env(), timeout=300)
    assert p.returncode == 0, p.stderr
    assert "route stax-cpu" in p.stdout and "kernel k0_" in p.stdout
    assert p.stdout.rstrip().splitlines()[-1].startswith("stax-cpu [] ")


def test_readme_names_every_option():
    from stax.options import OPTION_KEYS
    text = open(README, encoding="utf-8").read()
    for k in OPTION_KEYS:
        assert f"`{k}`" in text, f"README does not mention option {k}"


def test_readme_main_command_runs_the_demo():
    """`bash tools/demo.sh` = setup (CI has just done it) + benchmarks/demo.py."""
    assert "benchmarks/demo.py" in open(os.path.join(ROOT, "tools/demo.sh")).read()
    p = subprocess.run([sys.executable, "benchmarks/demo.py"], cwd=ROOT, capture_output=True,
                       text=True, env=_env(), timeout=600)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert "PASS" in p.stdout and "stax-cpu" in p.stdout, p.stdout[-2000:]
