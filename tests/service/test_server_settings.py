from __future__ import annotations

from pathlib import Path

import pytest

from service.__main__ import main, settings_from
from service.settings import Settings


def test_defaults() -> None:
    s = Settings()
    assert (s.bundle, s.host, s.port, s.provider) == (Path("models/en-de"), "0.0.0.0", 8000, "auto")
    assert s.api_key is None and s.admin_token is None and s.cors_origins == []


def test_environment_then_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MT_MAX_QUEUE", "7")
    monkeypatch.setenv("MT_PORT", "9000")
    monkeypatch.setenv("MT_CORS_ORIGINS", "https://a.example, https://b.example")
    monkeypatch.setenv("MT_API_KEY", "")  # compose passes unset secrets as empty strings
    monkeypatch.setenv("MT_ADMIN_TOKEN", "t0ken")
    s = settings_from(["--max-queue", "9", "--provider", "cpu", "--debug"])
    assert (s.max_queue, s.port, s.provider, s.debug) == (9, 9000, "cpu", True)
    assert s.cors_origins == ["https://a.example", "https://b.example"]
    assert s.api_key is None
    assert s.admin_token is not None and s.admin_token.get_secret_value() == "t0ken"
    assert "t0ken" not in repr(s)


def test_secrets_are_not_flags_and_bad_values_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        settings_from(["--api-key", "visible-in-ps"])
    assert exited.value.code == 2
    assert main(["--max-batch-tokens", "0"]) == 2
    assert "max_batch_tokens" in capsys.readouterr().err


def test_help_lists_every_flag_with_its_variable(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    for flag, env in [("--bundle", "MT_BUNDLE"), ("--max-wait-ms", "MT_MAX_WAIT_MS")]:
        assert flag in out and env in out
    assert "default: 8000" in out


def test_provider_defaults_resolve_by_where_the_engine_runs_and_keep_what_is_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """-1: the CPU's batch limits, admissions and running sets, or the GPU's; a value set is kept on either; the
    batch scheduler keeps two batches in flight on a GPU too. MT_ENGINE_PROCESS unset: on a GPU only."""
    import service.app as app

    for gpu, expected in [(False, app.CPU_DEFAULTS), (True, app.GPU_DEFAULTS)]:
        monkeypatch.setattr(app, "on_gpu", lambda settings, gpu=gpu: gpu)
        resolved = app.resolve(Settings())
        assert {name: getattr(resolved, name) for name in expected} == expected
        kept = app.resolve(Settings(max_batch_tokens=512, max_batch_sentences=8, admit_every=3, inflight_batches=4))
        assert (kept.max_batch_tokens, kept.max_batch_sentences, kept.admit_every, kept.inflight_batches) == (
            512,
            8,
            3,
            4,
        )
        assert app.resolve(Settings(max_batch_sentences=8)).max_batch_tokens == expected["max_batch_tokens"]
        assert app.resolve(Settings(scheduler="batch")).inflight_batches == 2
        # the engine in a process of its own: on a GPU with the continuous scheduler, unless set
        assert app.resolve(Settings()).engine_process is gpu
        assert app.resolve(Settings(scheduler="batch")).engine_process is False
        for chosen in (True, False):
            assert app.resolve(Settings(engine_process=chosen)).engine_process is chosen
    assert app.GPU_DEFAULTS["max_batch_tokens"] > app.CPU_DEFAULTS["max_batch_tokens"]
    for name in app.CPU_DEFAULTS:
        with pytest.raises(ValueError, match="not a size or a count"):
            Settings(**{name: 0})


def test_threads_default_to_the_cpus_shared_among_the_batches_in_flight(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """MT_THREADS=0 on the CPU: the usable CPUs (a container's quota included) divided among the batches that
    decode at once, at least one each; what the server then asks each model's engine for."""
    import inference.threads as threads
    import service.app as app
    from testkit.fake_engine import FakeLoader, write_fake_bundle
    from tests.service.servers import settings_for, thread_server

    quota = tmp_path / "cpu.max"
    monkeypatch.setattr(threads, "CGROUP_CPU_MAX", quota)  # inference/threads.py: the server's and back-translate's
    monkeypatch.setattr(threads.os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    assert app.usable_cpus() == 16  # no cgroup file: the affinity
    quota.write_text("max 100000\n")
    assert app.usable_cpus() == 16
    quota.write_text("250000 100000\n")  # a limit of 2.5 CPUs
    assert app.usable_cpus() == 3
    cpu = {"provider": "cpu"}
    assert app.engine_threads(app.resolve(Settings(**cpu))) == 1  # 3 CPUs, 2 batches in flight
    assert app.engine_threads(Settings(**cpu, inflight_batches=1)) == 3
    quota.write_text("max 100000\n")
    assert app.engine_threads(app.resolve(Settings(**cpu))) == 8
    assert app.engine_threads(Settings(**cpu, inflight_batches=8)) == 2
    quota.write_text("50000 100000\n")  # half a CPU: one thread even for two batches
    assert (app.usable_cpus(), app.engine_threads(app.resolve(Settings(**cpu)))) == (1, 1)
    assert app.engine_threads(Settings(**cpu, threads=6)) == 6  # set: kept
    assert app.engine_threads(Settings(**cpu, shared_pool=True)) == 0  # the pool's size is onnxruntime's

    quota.write_text("max 100000\n")
    asked: list[int] = []
    fake = FakeLoader()

    def loader(bundle: Path, *, provider: str, threads: int) -> object:
        asked.append(threads)
        return fake(bundle, provider=provider, threads=threads)

    with thread_server(settings_for(write_fake_bundle(tmp_path / "en-de"), **cpu, inflight_batches=4), loader) as s:
        assert s.client.post("/translate", json={"text": "a b"}).status_code == 200
    assert asked == [4]


@pytest.mark.parametrize(
    ("env", "argv", "expected"),
    [
        ({}, [], None),
        ({"MT_ENGINE_PROCESS": "auto"}, [], None),
        ({"MT_ENGINE_PROCESS": "1"}, [], True),
        ({"MT_ENGINE_PROCESS": "false"}, [], False),
        ({"MT_ENGINE_PROCESS": "1"}, ["--no-engine-process"], False),
        ({}, ["--engine-process"], True),
    ],
)
def test_the_engine_process_is_auto_unless_set_by_environment_or_flag(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], argv: list[str], expected: bool | None
) -> None:
    """MT_ENGINE_PROCESS: unset or auto leaves it to where the engine runs (resolved by service.app.resolve); a
    flag wins over the environment."""
    monkeypatch.delenv("MT_ENGINE_PROCESS", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert settings_from(argv).engine_process is expected
