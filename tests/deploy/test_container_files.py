"""The packaging and deployment files agree with each other.

No Docker engine is needed: the Dockerfile, the compose files, the Prometheus config, the Makefile
and pyproject.toml are parsed and cross-checked, so a change to one that the others don't follow
fails here.
"""

from __future__ import annotations

import ast
import fnmatch
import json
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
COMPOSE = ROOT / "docker-compose.yml"
COMPOSE_CPU = ROOT / "docker-compose.cpu.yml"
COMPOSE_SCHEMA = ROOT / "deploy" / "compose-spec.json"
PROMETHEUS = ROOT / "deploy" / "prometheus.yml"
PYPROJECT = ROOT / "pyproject.toml"
PACKAGES = ("core", "inference", "service", "training")
"""The top-level packages the wheel (and so the image) carries."""

# pip options that change how the project is installed but not what gets installed.
IRRELEVANT_PIP_OPTIONS = {"-e", "--editable", "--no-cache-dir", "-q", "--quiet", "--no-compile"}
TRAINING_ONLY = {"torch", "onnx", "onnxscript", "sacrebleu", "tqdm"}


# --------------------------------------------------------------------------------------------------
# Dockerfile


@dataclass
class Stage:
    name: str
    base: str
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def args(self, keyword: str) -> list[str]:
        return [args for kw, args in self.instructions if kw == keyword]


def parse_dockerfile(path: Path = DOCKERFILE) -> list[Stage]:
    logical: list[str] = []
    current = ""
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if line.startswith("#") or not line:
            continue  # comments may sit between continuation lines, too
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        logical.append(current + line)
        current = ""
    assert not current, "Dockerfile ends in a line continuation"

    stages: list[Stage] = []
    for line in logical:
        keyword, _, args = line.partition(" ")
        keyword, args = keyword.upper(), args.strip()
        if keyword == "FROM":
            words = args.split()
            words = [w for w in words if not w.startswith("--platform")]
            name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else str(len(stages))
            stages.append(Stage(name=name, base=words[0]))
        elif stages:
            stages[-1].instructions.append((keyword, args))
    return stages


def stage(stages: list[Stage], name: str) -> Stage:
    found = [s for s in stages if s.name == name]
    assert found, f"Dockerfile has no stage {name!r}; stages: {[s.name for s in stages]}"
    return found[0]


def copy_from(args: str) -> str | None:
    match = re.search(r"--from=(\S+)", args)
    return match.group(1) if match else None


def stage_chain(stages: list[Stage], name: str) -> list[Stage]:
    """The stage, the stages it is built FROM, and those it COPYs --from, recursively."""
    names = {s.name for s in stages}
    seen: list[Stage] = []
    todo = [name]
    while todo:
        current = stage(stages, todo.pop())
        if current in seen:
            continue
        seen.append(current)
        if current.base in names:
            todo.append(current.base)
        for args in current.args("COPY"):
            source = copy_from(args)
            if source in names:
                todo.append(source)
    return seen


def shell_commands(script: str) -> list[list[str]]:
    """Split a RUN line into simple commands (on &&, ||, ;, |)."""
    lexer = shlex.shlex(script, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    commands: list[list[str]] = [[]]
    for token in lexer:
        if token in {"&&", "||", ";", "|", "&"}:
            commands.append([])
        else:
            commands[-1].append(token)
    return [c for c in commands if c]


def pip_installs(commands: list[list[str]]) -> list[list[str]]:
    """The arguments after `pip install` of every pip call (python -m pip, pip, /venv/bin/pip)."""
    found = []
    for words in commands:
        for i in range(len(words) - 1):
            program = words[i]
            is_pip = Path(program).name in {"pip", "pip3"} or (program == "pip" and i > 0 and words[i - 1] == "-m")
            if is_pip and words[i + 1] == "install":
                found.append(words[i + 2 :])
                break
    return found


def normalize(install_args: list[str]) -> list[str]:
    return sorted(a for a in install_args if a not in IRRELEVANT_PIP_OPTIONS)


def runtime_stage(stages: list[Stage]) -> Stage:
    """The stage that runs the service: ENTRYPOINT python -m service."""
    found = [s for s in stages if any("service" in a for a in s.args("ENTRYPOINT"))]
    assert len(found) == 1, f"expected one stage whose ENTRYPOINT runs the service, got {found}"
    return found[0]


def env_of(stage_: Stage) -> dict[str, str]:
    env: dict[str, str] = {}
    for args in stage_.args("ENV"):
        for token in shlex.split(args):
            key, sep, value = token.partition("=")
            if sep:
                env[key] = value
    return env


def default_arg(stages_text: str, name: str) -> str:
    match = re.search(rf"^ARG {name}=(\S+)", stages_text, re.MULTILINE)
    assert match, f"Dockerfile declares no default for ARG {name}"
    return match.group(1)


# --------------------------------------------------------------------------------------------------
# Makefile


def make_dry_run(target: str, tmp_path: Path) -> list[str]:
    if shutil.which("make") is None:
        pytest.skip("GNU make is not installed")
    venv = tmp_path / "venv"  # does not exist, so every prerequisite's recipe is printed
    result = subprocess.run(
        ["make", "--no-print-directory", "-n", "-B", target, f"VENV={venv}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.splitlines()


def makefile_pip_installs(target: str, tmp_path: Path) -> list[list[str]]:
    installs = []
    for line in make_dry_run(target, tmp_path):
        for args in pip_installs(shell_commands(line)):
            if args != ["--upgrade", "pip"]:
                installs.append(args)
    return installs


# --------------------------------------------------------------------------------------------------
# Compose (with Docker Compose's !reset / !override tags)


@dataclass
class Reset:
    value: Any


class ComposeLoader(yaml.SafeLoader):
    pass


def _tagged(loader: yaml.SafeLoader, node: yaml.Node) -> Reset:
    if isinstance(node, yaml.SequenceNode):
        return Reset(loader.construct_sequence(node, deep=True))
    if isinstance(node, yaml.MappingNode):
        return Reset(loader.construct_mapping(node, deep=True))
    return Reset(loader.construct_scalar(node))


ComposeLoader.add_constructor("!reset", _tagged)
ComposeLoader.add_constructor("!override", _tagged)


def load_compose(path: Path) -> dict[str, Any]:
    return yaml.load(path.read_text(encoding="utf-8"), Loader=ComposeLoader)


def resolve_tags(value: Any) -> Any:
    if isinstance(value, Reset):
        return resolve_tags(value.value)
    if isinstance(value, dict):
        return {k: resolve_tags(v) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve_tags(v) for v in value]
    return value


def merge(base: Any, override: Any) -> Any:
    """Compose's merge, as far as these files need it: mappings merge, sequences append, !reset and
    !override replace, scalars replace."""
    if isinstance(override, Reset):
        return resolve_tags(override.value)
    if isinstance(base, dict) and isinstance(override, dict):
        merged = dict(base)
        for key, value in override.items():
            merged[key] = merge(base[key], value) if key in base else resolve_tags(value)
        return merged
    if isinstance(base, list) and isinstance(override, list):
        return base + [v for v in resolve_tags(override) if v not in base]
    return resolve_tags(override)


def gpu_devices(service: dict[str, Any]) -> list[dict[str, Any]]:
    reservations = service.get("deploy", {}).get("resources", {}).get("reservations", {})
    return reservations.get("devices", []) or []


def container_ports(service: dict[str, Any]) -> set[int]:
    ports = set()
    for entry in service.get("ports", []):
        if isinstance(entry, dict):
            ports.add(int(entry["target"]))
        else:
            ports.add(int(str(entry).rsplit(":", 1)[-1].split("/")[0]))
    return ports


def named_volume_mounts(service: dict[str, Any]) -> dict[str, str]:
    """volume name -> mount point, for named volumes (not bind mounts)."""
    mounts = {}
    for entry in service.get("volumes", []):
        source, target = (
            (entry.get("source"), entry.get("target")) if isinstance(entry, dict) else tuple(str(entry).split(":")[:2])
        )
        if source and not str(source).startswith((".", "/", "~", "$")):
            mounts[str(source)] = str(target)
    return mounts


@pytest.fixture(scope="module")
def stages() -> list[Stage]:
    return parse_dockerfile()


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return resolve_tags(load_compose(COMPOSE))


@pytest.fixture(scope="module")
def compose_cpu() -> dict[str, Any]:
    return merge(load_compose(COMPOSE), load_compose(COMPOSE_CPU))


@pytest.fixture(scope="module")
def prometheus() -> dict[str, Any]:
    return yaml.safe_load(PROMETHEUS.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def pyproject() -> dict[str, Any]:
    return tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))


# --------------------------------------------------------------------------------------------------
# The image installs what `make install-serve` installs, and no torch


def test_runtime_image_installs_what_make_install_serve_installs(stages: list[Stage], tmp_path: Path) -> None:
    make_installs = makefile_pip_installs("install-serve", tmp_path)
    assert len(make_installs) == 1, f"install-serve should run one pip install, got {make_installs}"

    chain = stage_chain(stages, runtime_stage(stages).name)
    docker_installs = [args for s in chain for run in s.args("RUN") for args in pip_installs(shell_commands(run))]
    assert len(docker_installs) == 1, (
        f"the runtime image should come from one pip install, got {docker_installs} in stages {[s.name for s in chain]}"
    )
    assert normalize(docker_installs[0]) == normalize(make_installs[0]), (
        f"Dockerfile installs {docker_installs[0]}, `make install-serve` installs {make_installs[0]}"
    )
    assert normalize(make_installs[0]) == ["."], "serving installs the project without extras"


def test_make_install_takes_training_and_dev_extras(tmp_path: Path) -> None:
    """The project with both extras into the venv; besides it, only Microsoft's newer client, into a folder of its
    own (tests/service/test_microsoft.py puts it on a subprocess' path: the venv keeps the 1.x the tests import)."""
    installs = makefile_pip_installs("install", tmp_path)
    assert [normalize(a) for a in installs[:1]] == [[".[train,dev]"]]
    for extra in installs[1:]:
        assert "--target" in extra and "--no-deps" in extra, f"a second install into the venv itself: {extra}"
        assert Path(extra[extra.index("--target") + 1]).name == "azure-text-2", extra


def test_runtime_image_has_no_torch(stages: list[Stage]) -> None:
    for s in stage_chain(stages, runtime_stage(stages).name):
        for run in s.args("RUN"):
            assert "torch" not in run, f"stage {s.name} mentions torch: {run}"
            for args in pip_installs(shell_commands(run)):
                assert not any("[" in a for a in args), f"stage {s.name} installs extras: {args}"


def test_core_dependencies_are_serving_only(pyproject: dict[str, Any]) -> None:
    def name(requirement: str) -> str:
        match = re.match(r"[A-Za-z0-9_.-]+", requirement)
        assert match, requirement
        return match.group(0).lower().replace("_", "-")

    core = {name(r) for r in pyproject["project"]["dependencies"]}
    assert not core & TRAINING_ONLY, f"training-only packages in core deps: {core & TRAINING_ONLY}"
    for needed in ("fastapi", "uvicorn", "pydantic-settings", "sentencepiece", "numpy", "pysbd"):
        assert needed in core, f"{needed} missing from the serving dependencies"
    assert {"onnxruntime-gpu", "onnxruntime"} & core
    train = {name(r) for r in pyproject["project"]["optional-dependencies"]["train"]}
    assert {"torch", "onnx", "sacrebleu"} <= train


def test_torch_is_pinned_exactly_everywhere(pyproject: dict[str, Any]) -> None:
    """Any looser spec lets pip pull a multi-GB CUDA build of torch instead of the local CPU one."""
    groups = {"core": pyproject["project"]["dependencies"]}
    groups.update(pyproject["project"]["optional-dependencies"])
    for group, requirements in groups.items():
        for requirement in requirements:
            if re.match(r"torch\b(?![-_])", requirement):
                assert re.fullmatch(r"torch==\d+\.\d+\.\d+", requirement.replace(" ", "")), (
                    f"{group}: {requirement!r} must be an exact pin (torch==X.Y.Z)"
                )


def test_console_scripts_point_at_real_functions(pyproject: dict[str, Any]) -> None:
    for script, target in pyproject["project"]["scripts"].items():
        module, _, attribute = target.partition(":")
        path = ROOT.joinpath(*module.split(".")).with_suffix(".py")
        assert path.is_file(), f"{script} -> {target}: {path.relative_to(ROOT)} does not exist"
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {node.name for node in tree.body if isinstance(node, ast.FunctionDef | ast.ClassDef)} | {
            alias.asname or alias.name for node in tree.body if isinstance(node, ast.ImportFrom) for alias in node.names
        }
        assert attribute in names, f"{script} -> {target}: no {attribute!r} in {path.name}"


def test_every_python_folder_is_a_package() -> None:
    """Packages are found with namespaces = false: a folder without __init__.py would silently be
    left out of the wheel, and so out of the Docker image."""
    for top in PACKAGES:
        for folder in [ROOT / top, *(p for p in (ROOT / top).rglob("*") if p.is_dir())]:
            if "__pycache__" in folder.parts:
                continue
            if any(folder.glob("*.py")):
                assert (folder / "__init__.py").is_file(), f"{folder} has modules, no __init__.py"


def test_wheel_contains_the_packages(tmp_path: Path) -> None:
    """Build the wheel the image installs and check it carries every module and no tests."""
    pytest.importorskip("setuptools", minversion="70.1")
    # Build from a copy: setuptools writes build/ and *.egg-info beside the sources.
    source = tmp_path / "src"
    source.mkdir()
    shutil.copy(PYPROJECT, source)
    junk = shutil.ignore_patterns("__pycache__", "*.pyc")
    for top in PACKAGES:
        shutil.copytree(ROOT / top, source / top, ignore=junk)
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
        + ["-w", str(tmp_path / "dist"), str(source)],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    [wheel] = (tmp_path / "dist").glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for top in PACKAGES:
        for module in (ROOT / top).rglob("*.py"):
            if "__pycache__" not in module.parts:
                relative = module.relative_to(ROOT).as_posix()
                assert relative in names, f"{relative} is missing from the wheel"
    static = ROOT / "service" / "static"
    for asset in static.rglob("*") if static.is_dir() else []:
        if asset.is_file():
            assert asset.relative_to(ROOT).as_posix() in names, f"{asset} is not in the wheel"
    assert not any(n.startswith(("tests/", "testkit/", "bench/", "docs/")) for n in names)


# --------------------------------------------------------------------------------------------------
# Dockerfile's runtime stage


def test_runtime_stage_settings(stages: list[Stage]) -> None:
    runtime = runtime_stage(stages)
    assert stages[-1] is runtime, "the runtime must be the last stage (the default build target)"

    users = runtime.args("USER")
    assert users, "the runtime stage sets no USER: it would run as root"
    user = users[-1].split(":")[0]
    assert user not in {"root", "0"}, f"the runtime runs as {users[-1]}"

    assert json.loads(runtime.args("ENTRYPOINT")[-1]) == ["python", "-m", "service"]

    env = env_of(runtime)
    assert env.get("MT_HOST") == "0.0.0.0"
    assert runtime.args("EXPOSE") == [env["MT_PORT"]], "EXPOSE and MT_PORT disagree"

    [healthcheck] = runtime.args("HEALTHCHECK")
    assert "/readyz" in healthcheck and "urllib" in healthcheck
    assert "curl" not in healthcheck and "wget" not in healthcheck

    destinations = [shlex.split(a)[-1].rstrip("/") for a in runtime.args("COPY")]
    for bundle in (env.get("MT_BUNDLES") or env["MT_BUNDLE"]).split(","):
        assert any(bundle.startswith(d + "/") for d in destinations), (
            f"bundle {bundle} is not under any COPY destination {destinations}"
        )


def test_default_base_is_a_cuda13_cudnn_runtime() -> None:
    base = default_arg(DOCKERFILE.read_text(encoding="utf-8"), "BASE")
    assert base.startswith("nvidia/cuda:13.") and "cudnn" in base and "runtime" in base, base


def test_dockerignore_lets_copy_sources_in_and_keeps_junk_out(stages: list[Stage]) -> None:
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]

    def excluded(path: str) -> bool:
        parts = path.strip("/").split("/")
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        verdict = False
        for pattern in patterns:
            negated = pattern.startswith("!")
            pattern = pattern.lstrip("!").strip("/")
            if any(fnmatch.fnmatchcase(p, pattern) for p in prefixes):
                verdict = not negated
        return verdict

    sources = []
    for s in stages:
        for args in s.args("COPY"):
            if copy_from(args) is None:
                words = [w for w in shlex.split(args) if not w.startswith("--")]
                sources += words[:-1]
    assert sources
    for source in sources:
        assert not excluded(source), f".dockerignore excludes {source}, which the Dockerfile COPYs"
    for junk in (".venv", ".git", "data", "cache", "runs", "service/__pycache__"):
        assert excluded(junk), f".dockerignore lets {junk} into the build context"


# --------------------------------------------------------------------------------------------------
# Compose and Prometheus


def test_compose_files_match_the_compose_spec(compose: dict[str, Any], compose_cpu: dict[str, Any]) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(COMPOSE_SCHEMA.read_text(encoding="utf-8"))
    override = resolve_tags(load_compose(COMPOSE_CPU))
    for name, document in (("base", compose), ("cpu override", override), ("merged", compose_cpu)):
        errors = list(jsonschema.Draft7Validator(schema).iter_errors(document))
        assert not errors, f"{name}: " + "; ".join(
            f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors
        )


def test_translator_port_matches_everywhere(
    compose: dict[str, Any], stages: list[Stage], prometheus: dict[str, Any]
) -> None:
    translator = compose["services"]["translator"]
    port = int(translator["environment"]["MT_PORT"])
    assert container_ports(translator) == {port}
    assert env_of(runtime_stage(stages))["MT_PORT"] == str(port)
    assert f"127.0.0.1:{port}/readyz" in " ".join(translator["healthcheck"]["test"])

    [job] = [j for j in prometheus["scrape_configs"] if j["job_name"] == "translator"]
    assert job.get("metrics_path", "/metrics") == "/metrics"
    targets: list[tuple[str, int]] = []
    for sd in job.get("dns_sd_configs", []):
        targets += [(name, int(sd["port"])) for name in sd["names"]]
    for static in job.get("static_configs", []):
        for target in static["targets"]:
            host, _, target_port = target.rpartition(":")
            targets.append((host, int(target_port)))
    assert targets, "the translator job has no targets"
    for host, target_port in targets:
        assert host in compose["services"], f"Prometheus scrapes {host}, not a compose service"
        assert target_port == port, f"Prometheus scrapes port {target_port}, service has {port}"


def test_prometheus_scrapes_every_15s_with_the_mounted_config(
    compose: dict[str, Any], prometheus: dict[str, Any]
) -> None:
    [job] = [j for j in prometheus["scrape_configs"] if j["job_name"] == "translator"]
    assert job.get("scrape_interval", prometheus["global"]["scrape_interval"]) == "15s"

    service = compose["services"]["prometheus"]
    config_flag = [a for a in service["command"] if a.startswith("--config.file=")]
    default = "/etc/prometheus/prometheus.yml"
    config_path = config_flag[0].split("=", 1)[1] if config_flag else default
    mounts = {str(v).split(":")[1]: str(v).split(":")[0] for v in service["volumes"]}
    assert config_path in mounts, f"nothing is mounted at {config_path}"
    assert (ROOT / mounts[config_path]).resolve() == PROMETHEUS.resolve()


def test_gpu_by_default_cpu_with_the_override(compose: dict[str, Any], compose_cpu: dict[str, Any]) -> None:
    devices = gpu_devices(compose["services"]["translator"])
    assert devices and devices[0]["driver"] == "nvidia" and "gpu" in devices[0]["capabilities"]
    for name, service in compose_cpu["services"].items():
        assert not gpu_devices(service), f"{name} still reserves a GPU in the CPU variant"
    translator = compose_cpu["services"]["translator"]
    assert translator["environment"]["MT_PROVIDER"] == "cpu"
    base = translator["build"]["args"]["BASE"]
    assert base.startswith("python:3.") and "cuda" not in base


def test_build_targets_exist(compose: dict[str, Any], stages: list[Stage]) -> None:
    names = {s.name for s in stages}
    for name, service in compose["services"].items():
        if "build" in service:
            target = service["build"].get("target")
            assert target in names, f"{name} builds target {target!r}; stages are {sorted(names)}"
    assert compose["services"]["translator"]["build"]["target"] == runtime_stage(stages).name


def test_trainer_shares_bundles_with_translator(compose: dict[str, Any], stages: list[Stage]) -> None:
    services = compose["services"]
    trainer, translator = services["trainer"], services["translator"]
    assert "train" in trainer.get("profiles", []), "the trainer must only run with --profile train"

    trainer_stage = stage(stages, trainer["build"]["target"])
    installs = [a for run in trainer_stage.args("RUN") for a in pip_installs(shell_commands(run))]
    assert any(".[train]" in normalize(a) for a in installs), installs

    declared = set(compose.get("volumes") or {})
    for name, service in services.items():
        for volume in named_volume_mounts(service):
            assert volume in declared, f"{name} mounts undeclared volume {volume}"

    shared = set(named_volume_mounts(trainer)) & set(named_volume_mounts(translator))
    assert shared, "trainer and translator share no named volume for bundles"
    environment = translator["environment"]
    mount_points = [named_volume_mounts(translator)[v] for v in shared]
    for bundle in (environment.get("MT_BUNDLES") or environment["MT_BUNDLE"]).split(","):
        assert any(bundle.startswith(m.rstrip("/") + "/") for m in mount_points), (
            f"bundle {bundle} is not inside the shared volume ({mount_points})"
        )


def test_ci_script_is_strict() -> None:
    script = ROOT / ".ci" / "run"
    text = script.read_text(encoding="utf-8")
    assert text.startswith("#!/usr/bin/env bash") or text.startswith("#!/bin/bash")
    assert "set -euo pipefail" in text
    assert re.search(r"\bprometheus\b", text), "CI must install prometheus (promtool)"
    assert "make test" in text
