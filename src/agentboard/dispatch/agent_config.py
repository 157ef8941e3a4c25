"""What an agent CLI's own configuration says, read the way the CLI reads it: the model provider
a Codex profile's ``config.toml`` (with its config profile and the command's ``-c``/``-m``/
``--oss``) names and the key it needs, the providers and keys of opencode's configs
(``OPENCODE_CONFIG_CONTENT``, its config file), and the model either names. ``profiles check``
reads its credentials from here, and the dispatcher the fix a sign-in block names."""

from __future__ import annotations

import json
import os
import re
import shlex
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import adapters


def lookup(env: dict[str, str], name: str) -> str | None:
    """A variable as the worker gets it: the profile's env over this process's environment."""
    return env.get(name) or os.environ.get(name) or None


#: Codex's own providers that need no key (a local model server)
_CODEX_LOCAL = ("oss", "ollama", "lmstudio")


@dataclass
class CodexProvider:
    """The model provider a Codex profile uses when it is not OpenAI's own."""

    name: str
    #: the config.toml it was read from
    config: Path
    #: the variable holding its key (``env_key``)
    env_key: str | None = None
    #: defined in the config (or one of Codex's local providers)
    defined: bool = True
    local: bool = False
    #: its ``experimental_bearer_token`` is set
    bearer: bool = False
    #: ``requires_openai_auth``: OpenAI's login or key
    openai_auth: bool = False


def codex_home(env: dict[str, str], home: str | None = None) -> Path:
    """The Codex home of a profile's workers: its ``CODEX_HOME``, else ``~/.codex`` of their home."""
    given = lookup(env, "CODEX_HOME")
    if given:
        return Path(given).expanduser()
    return Path(env.get("HOME") or home or os.path.expanduser("~")) / ".codex"


def codex_config(profile: dict[str, Any], home: str | None = None) -> tuple[dict[str, Any], Path]:
    """The settings a profile's Codex works with, and the config.toml they come from: that file,
    with the config profile its command selects (``-p NAME``: ``NAME.config.toml`` beside it or
    its ``[profiles.NAME]``) and the command's ``-c key=value``, ``-m`` and ``--oss`` over it."""
    env = {k: str(v) for k, v in (profile.get("env") or {}).items()}
    folder = codex_home(env, home)
    path = folder / "config.toml"
    config = _toml(path)
    try:
        words = shlex.split(str(profile.get("command") or ""))[1:]
    except ValueError:
        words = []
    overrides: list[str] = []
    selected = config.get("profile")
    i = 0
    while i < len(words):
        word, following = words[i], (words[i + 1] if i + 1 < len(words) else None)
        if word in ("-c", "--config", "-p", "--profile", "-m", "--model") and following is not None:
            if word in ("-p", "--profile"):
                selected = following
            else:
                overrides.append(following if word in ("-c", "--config") else f"model={json.dumps(following)}")
            i += 2
            continue
        if word.startswith(("--config=", "--profile=", "--model=")):
            flag, _, given = word.partition("=")
            if flag == "--profile":
                selected = given
            else:
                overrides.append(given if flag == "--config" else f"model={json.dumps(given)}")
        elif word == "--oss":
            overrides.append('model_provider="oss"')
        i += 1
    if isinstance(selected, str) and selected:
        profiles = config.get("profiles")
        table = profiles.get(selected) if isinstance(profiles, dict) else None
        if isinstance(table, dict):
            config = _merged(config, table)
        config = _merged(config, _toml(folder / f"{selected}.config.toml"))
    for override in overrides:
        key, sep, raw = override.partition("=")
        if not sep or not key.strip():
            continue
        try:
            value: Any = tomllib.loads(f"v = {raw}")["v"]
        except tomllib.TOMLDecodeError:
            value = raw  # Codex takes a value that is not TOML as a string
        parts = [p.strip().strip('"') for p in key.strip().split(".")]
        config = _merged(config, _nested(parts, value))
    return config, path


def codex_provider(profile: dict[str, Any], home: str | None = None) -> CodexProvider | None:
    """The model provider a Codex profile's config names, or None for OpenAI's own (a login
    or ``OPENAI_API_KEY``)."""
    try:
        config, path = codex_config(profile, home)
    except (OSError, ValueError, AttributeError, TypeError):  # a config this check cannot read: Codex's own
        return None
    name = config.get("model_provider")
    if not isinstance(name, str) or not name or name == "openai":
        return None
    providers = config.get("model_providers")
    spec = providers.get(name) if isinstance(providers, dict) else None
    if not isinstance(spec, dict):
        return CodexProvider(name, path, defined=name in _CODEX_LOCAL, local=name in _CODEX_LOCAL)
    env_key = spec.get("env_key")
    return CodexProvider(name, path, env_key=env_key if isinstance(env_key, str) and env_key else None,
                         bearer=bool(spec.get("experimental_bearer_token")),
                         openai_auth=bool(spec.get("requires_openai_auth")))


def login_fix(adapter: str, profile: dict[str, Any], home: str | None = None) -> str:
    """How a person gives a profile's agent CLI its credentials: for Codex with a model provider
    of its own, the provider's ``env_key``; for opencode, the ``apiKey`` of the provider its model
    uses, in the config that gives it; else :data:`adapters.LOGIN`."""
    if adapter == "codex":
        try:
            provider = codex_provider(profile, home)
        except Exception:  # noqa: BLE001 - a hint must not fail what asked for it
            provider = None
        if provider is not None and provider.env_key and not provider.openai_auth:
            return (f"set {provider.env_key} in the profile's env (`codex login` does not sign in to Codex's "
                    f"model provider {provider.name!r}, whose env_key it is in {provider.config})")
    if adapter == "opencode":
        try:
            fix = _opencode_fix(profile, home)
        except Exception:  # noqa: BLE001 - a hint must not fail what asked for it
            fix = None
        if fix is not None:
            return fix
    return adapters.LOGIN.get(adapter, "give the agent its credentials")


def _opencode_fix(profile: dict[str, Any], home: str | None) -> str | None:
    """Where the key of the provider a profile's opencode model uses is set (its ``options.apiKey``
    in one of opencode's configs: a ``{env:VAR}`` names VAR), or None when no config gives that
    provider a key (opencode's login or the provider's own variable then)."""
    env = {k: str(v) for k, v in (profile.get("env") or {}).items()}
    model = str(profile.get("model") or "") or configured_model("opencode", profile, home) or ""
    wanted = model.split("/", 1)[0] if "/" in model else None
    keyed = []
    for where, config in opencode_configs(env, home):
        providers = config.get("provider")
        for name, spec in (providers.items() if isinstance(providers, dict) else []):
            options = spec.get("options") if isinstance(spec, dict) else None
            key = options.get("apiKey") if isinstance(options, dict) else None
            if isinstance(key, str) and (wanted is None or name == wanted):
                keyed.append((name, where, key))
    if wanted is None and len({name for name, _, _ in keyed}) != 1:
        return None  # no model named, and not one provider with a key: which one is not known
    if not keyed:
        return None
    name, where, key = keyed[0]  # the first config wins (OPENCODE_CONFIG_CONTENT over the file)
    named = re.fullmatch(r"\{env:([^}]*)\}", key.strip())
    if named:
        return (f"set {named[1].strip()} in the profile's env to a key provider {name!r} accepts (its apiKey in "
                f"{where} reads it)")
    where_said = f"{where} (the profile's env)" if where.startswith("$") else where
    return f"set a valid key as the apiKey of provider {name!r} in {where_said}"


def _toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return {}


def _nested(parts: list[str], value: Any) -> dict[str, Any]:
    out: dict[str, Any] = {parts[-1]: value}
    for part in reversed(parts[:-1]):
        out = {part: out}
    return out


def _merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` laid on ``base``, table by table."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merged(out[key], value)
        else:
            out[key] = value
    return out


def opencode_configs(env: dict[str, str], home: str | None) -> list[tuple[str, dict[str, Any]]]:
    """opencode's configs a worker gets beside the adapter's own: ``OPENCODE_CONFIG_CONTENT`` first
    (it wins), then the user's config file (``~/.config/opencode/opencode.json``)."""
    out: list[tuple[str, dict[str, Any]]] = []
    content = lookup(env, "OPENCODE_CONFIG_CONTENT")
    if content and isinstance(parsed := _jsonc(content), dict):
        out.append(("$OPENCODE_CONFIG_CONTENT", parsed))
    config_home = lookup(env, "XDG_CONFIG_HOME") or str(
        Path(env.get("HOME") or home or os.path.expanduser("~")) / ".config")
    for name in ("opencode.jsonc", "opencode.json", "config.json"):
        path = Path(config_home) / "opencode" / name
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError):
            continue
        if isinstance(parsed := _jsonc(text), dict):
            out.append((str(path), parsed))
    return out


def opencode_keys(env: dict[str, str], home: str | None) -> list[str]:
    """The providers given a key (``provider.NAME.options.apiKey``, a ``{env:VAR}`` in it set) in
    opencode's configs."""
    found = []
    for where, config in opencode_configs(env, home):
        providers = config.get("provider")
        for name, spec in (providers.items() if isinstance(providers, dict) else []):
            options = spec.get("options") if isinstance(spec, dict) else None
            key = options.get("apiKey") if isinstance(options, dict) else None
            if isinstance(key, str) and _resolved(key, env):
                found.append(f"the apiKey of provider {name!r} in {where}")
    return found


def _resolved(value: str, env: dict[str, str]) -> str:
    """A config value with opencode's ``{env:VAR}`` replaced (``{file:path}`` by a mark when the file exists)."""
    value = re.sub(r"\{env:([^}]*)\}", lambda m: lookup(env, m[1].strip()) or "", value)
    value = re.sub(r"\{file:([^}]*)\}", lambda m: "file" if os.path.isfile(os.path.expanduser(m[1].strip())) else "",
                   value)
    return value.strip()


def _jsonc(text: str) -> Any:
    """JSON with comments and trailing commas (opencode's config), or None."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    bare = re.sub(r'"(?:\\.|[^"\\])*"|//[^\n]*|/\*.*?\*/', lambda m: m[0] if m[0].startswith('"') else "", text,
                  flags=re.S)
    try:
        return json.loads(re.sub(r",(\s*[}\]])", r"\1", bare))
    except ValueError:
        return None


def configured_model(adapter: str, profile: dict[str, Any], home: str | None = None) -> str | None:
    """The model a profile's config names when the CLI does not say which answered (Codex's
    ``model``, opencode's ``--model`` or its config's ``model``), else None."""
    try:
        if adapter == "codex":
            model = codex_config(profile, home)[0].get("model")
            return model if isinstance(model, str) and model else None
        if adapter == "opencode":
            words = shlex.split(str(profile.get("command") or ""))
            for i, word in enumerate(words[:-1]):
                if word in ("-m", "--model"):
                    return words[i + 1]
            env = {k: str(v) for k, v in (profile.get("env") or {}).items()}
            for _where, config in opencode_configs(env, home):
                if isinstance(config.get("model"), str) and config["model"]:
                    return str(config["model"])
    except (OSError, ValueError, AttributeError, TypeError):
        return None
    return None
