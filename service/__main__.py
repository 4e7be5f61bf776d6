"""``python -m service``: serve a model bundle over HTTP.

Flags override ``MT_*`` environment variables, which override the defaults (see ``--help``). Keys
and tokens are read from the environment only, so they never show in ``ps``. SIGTERM stops accepting
connections, lets in-flight requests finish, then exits 0; SIGHUP reloads the bundle.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import typing
from collections.abc import Sequence
from types import FrameType

import uvicorn
from pydantic import SecretStr, ValidationError

from service.app import create_app
from service.loader import EngineLoader, load_engine
from service.logs import configure_logging
from service.models import ConfigurationError
from service.settings import Settings

log = logging.getLogger("service")


def _flag_type(annotation: object) -> tuple[type, list[str] | None]:
    """argparse type and choices for a settings field."""
    if typing.get_origin(annotation) is typing.Literal:
        return str, [str(a) for a in typing.get_args(annotation)]
    if annotation in (int, float):
        return typing.cast(type, annotation), None
    return str, None


def parser() -> argparse.ArgumentParser:
    """One flag per setting, help text taken from the settings' own descriptions."""
    p = argparse.ArgumentParser(
        prog="python -m service",
        description="Serve a translation model bundle over HTTP (POST /translate, /docs).",
        epilog="Every flag has an MT_* environment variable (e.g. --max-queue is MT_MAX_QUEUE). "
        "MT_API_KEY and MT_ADMIN_TOKEN are environment-only. For more throughput run more "
        "replicas, one per device, not more workers.",
        allow_abbrev=False,  # --api-key is no flag (a secret stays out of ps), and no short form of --api-keys
    )
    for name, field in Settings.model_fields.items():
        annotation = field.annotation
        if annotation in (SecretStr, SecretStr | None):
            continue
        flag = "--" + name.replace("_", "-")
        default = field.get_default(call_default_factory=True)
        help_text = f"{field.description} [env MT_{name.upper()}]"
        if annotation in (bool, bool | None):  # --flag / --no-flag; neither: the default (None: auto)
            p.add_argument(flag, action=argparse.BooleanOptionalAction, default=None, help=help_text)
            continue
        kind, choices = _flag_type(annotation)
        shown = (",".join(default) or "none") if isinstance(default, list) else default
        p.add_argument(flag, type=kind, choices=choices, default=None, help=f"{help_text} (default: {shown})")
    return p


def settings_from(argv: Sequence[str] | None = None) -> Settings:
    args = vars(parser().parse_args(argv))
    return Settings(**{k: v for k, v in args.items() if v is not None})


class _Server(uvicorn.Server):
    """uvicorn's server, telling the app it is draining as soon as a shutdown signal arrives."""

    def __init__(self, config: uvicorn.Config, on_exit: typing.Callable[[], None]):
        super().__init__(config)
        self._on_exit = on_exit

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self._on_exit()
        super().handle_exit(sig, frame)


class _Stopped(Exception):
    pass


def _stop(sig: int, frame: FrameType | None) -> None:
    raise _Stopped()


def main(argv: Sequence[str] | None = None, *, engine_loader: EngineLoader = load_engine) -> int:
    try:
        settings = settings_from(argv)
    except ValidationError as err:
        print(f"invalid settings:\n{err}", file=sys.stderr)
        return 2
    configure_logging(settings.log_level)
    fatal: list[str] = []

    def on_fatal(reason: str) -> None:
        fatal.append(reason)
        server.should_exit = True

    try:
        app = create_app(settings, engine_loader=engine_loader, on_fatal=on_fatal)
    except ConfigurationError as err:
        print(f"invalid settings: {err}", file=sys.stderr)
        return 2

    def draining() -> None:
        app.state.service.models.draining = True

    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_config=None,  # our JSON logging, configured above
        access_log=False,  # the app logs one JSON line per request itself
        server_header=False,
        timeout_graceful_shutdown=int(settings.request_timeout_s) + 5,
    )
    server = _Server(config, draining)
    bundles = ", ".join(str(slot.bundle) for slot in app.state.service.models.slots)
    log.info("starting on %s:%s with %s", settings.host, settings.port, bundles)
    # uvicorn re-raises the shutdown signal after its graceful stop; ours makes that a clean exit
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    try:
        server.run()
    except _Stopped:
        pass
    if fatal:
        log.error("exiting: the model could not be loaded: %s", fatal[0])
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
