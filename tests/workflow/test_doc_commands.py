"""Every `snakemake` command line in README.md and the docs pages (docs/*.md) runs: each is parsed
with Snakemake's own argument
parser (the target it names really is a target, not swallowed by a many-valued option such as
--configfile or -R) and dry-run (`-n`, offline) on a copy of the workflow. Also: the default profile
(workflow/profiles/default) is in effect for a plain `snakemake` from the repository root."""

from __future__ import annotations

import importlib.util
import re
import shlex

import pytest
import yaml

from fixtures import REPO
from fixtures.snakemake import smk

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
RULE_RE = re.compile(r"^\s*(?:local)?rule\s+(\w+)\s*:", re.M)


def _rules() -> set[str]:
    return {
        m
        for f in (REPO / "workflow").rglob("*")
        if f.name == "Snakefile" or f.suffix == ".smk"
        for m in RULE_RE.findall(f.read_text())
    }


def doc_snakemake_commands() -> list[str]:
    """Every `snakemake ...` command of README.md and docs/*.md: in fenced blocks (continuation
    lines joined, each part of a `&&` chain, comments dropped) and in inline code spans."""
    text = "\n".join(p.read_text() for p in PAGES)
    cmds = []
    fences = re.findall(r"^```[a-z]*\n(.*?)^```", text, re.S | re.M)
    for block in fences:
        for line in re.sub(r"\\\n\s*", " ", block).splitlines():
            for part in re.split(r"&&|\|\||;", line):
                part = re.sub(r"\s+#.*$", "", part).strip()
                if re.match(r"snakemake(\s|$)", part):
                    cmds.append(part)
    prose = re.sub(r"^```[a-z]*\n.*?^```", "", text, flags=re.S | re.M)
    for span in re.findall(r"`([^`\n]+)`", prose):
        if re.match(r"snakemake\s", span):
            cmds.append(span.strip())
    return list(dict.fromkeys(cmds))


COMMANDS = doc_snakemake_commands()


def test_docs_have_the_commands():
    assert any(re.search(r"\bqualify\b", c) and "--configfile" in c for c in COMMANDS), COMMANDS
    assert any("--workflow-profile workflow/profiles/slurm" in c for c in COMMANDS), COMMANDS
    assert len(COMMANDS) >= 8, COMMANDS


@pytest.mark.parametrize("command", COMMANDS)
def test_doc_command_names_its_target(command):
    """A rule named last is a target: an option taking several values (--configfile, -R, --config)
    placed before it would swallow it."""
    from snakemake.cli import get_argument_parser

    argv = shlex.split(command)[1:]
    args = get_argument_parser().parse_args(argv)
    # the last word, a rule, directly after an option that names rules (-R aiperf_profile) is
    # meant as that option's value; anywhere else it is meant as the target
    rule_options = {"-R", "--forcerun", "-U", "--until", "-O", "--omit-from", "--allowed-rules"}
    named = [w for w in argv if w in _rules()]
    if named and argv[-1] == named[-1] and (len(argv) < 2 or argv[-2] not in rule_options):
        assert named[-1] in (args.targets or []), (
            f"`{command}`: {named[-1]!r} is read as an option's value, not as the target (targets: "
            f"{sorted(args.targets or [])}); put the target before --configfile / -R / --config"
        )
    for cf in args.configfile or []:
        assert (REPO / cf).is_file(), f"`{command}`: config file {cf!r} does not exist"


@pytest.mark.parametrize("command", COMMANDS)
def test_doc_command_dry_runs(command, wf):
    argv = shlex.split(command)[1:]
    if "--executor" in argv or any("profiles/slurm" in a for a in argv):
        if importlib.util.find_spec("snakemake_executor_plugin_slurm") is None:
            pytest.skip(
                "snakemake-executor-plugin-slurm is not installed (pip install -e '.[slurm]')"
            )
    # placeholders stand for what the reader fills in; the dry run needs a value
    argv = [a.replace("<VERSION>", "0.0.0+gdeadbeef") for a in argv]
    if "--report" in argv:  # a report needs results; check the DAG it is built from
        i = argv.index("--report")
        del argv[i : i + 2]
    r = smk(wf, *argv, "-n", cores=None)
    out = r.stdout + r.stderr
    if (
        "--lint" in argv
    ):  # exits 1 with the documented conda/container lint; anything else is a failure
        assert "Specify a conda environment or container" in out and "Traceback" not in out, out[
            -3000:
        ]
        return
    assert r.returncode == 0, f"`{command}` -n failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"


def test_default_profile_is_in_effect(wf):
    """A plain `snakemake -n qualify` from the root (no --cores, no -p) picks up
    workflow/profiles/default: it says so, needs no --cores and prints the shell commands."""
    r = smk(wf, "-n", "qualify", "--config", "software_key=prof", cores=None)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-3000:]
    assert "Using workflow specific profile workflow/profiles/default" in out, out[:2000]
    assert "qualflow pin --checkpoint" in out  # printshellcmds: true, from the profile
    prof = yaml.safe_load((REPO / "workflow" / "profiles" / "default" / "config.yaml").read_text())
    assert (
        prof["rerun-incomplete"] is True and prof["keep-going"] is True and prof["cores"] == "all"
    )
