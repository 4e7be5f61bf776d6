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
    assert "default: 4096" in out
