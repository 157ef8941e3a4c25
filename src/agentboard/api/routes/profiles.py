"""Profiles: the named agents. People read them (environment values hidden from all but an
unscoped administrator); a run token (a worker) sees no profile's command or environment.
Only an administrator changes them."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi import Path as PathParam
from starlette.responses import Response

from ...domain.errors import InvalidInput
from ...kernel import profiles
from ..answers import ProfileCheck, ProfileRow
from ..auth import Principal, current
from ..models import ProfileCreate, ProfilePatch
from .common import Json, responses, state

router = APIRouter(prefix="/api", tags=["profiles"])
Name = PathParam(min_length=1, max_length=64, description="profile name")


def _shown(row: dict[str, Any], who: Principal) -> dict[str, Any]:
    """A profile as ``who`` may see it: all of it for an unscoped administrator; environment
    values masked for other people; for a run token (and a viewer) no command and no
    environment at all (a worker has no business with another agent's command line)."""
    if who.role == "admin" and not who.boards:
        return row
    out = dict(row)
    out["env"] = {k: "***" for k in (row.get("env") or {})}
    if who.role not in ("admin", "member"):
        out["command"] = None
        out["env"] = {}
    return out


@router.get("/profiles", response_model=list[ProfileRow], responses=responses())
def list_profiles(request: Request, who: Principal = Depends(current)) -> Response:
    return Json([_shown(p, who) for p in profiles.list_profiles(state(request).db)])


@router.post("/profiles", response_model=ProfileRow, status_code=201, responses=responses(400, 409))
def add_profile(request: Request, data: ProfileCreate, who: Principal = Depends(current)) -> Response:
    who.check_admin()
    out = profiles.add(state(request).db, data.name, command=data.command, adapter=data.adapter,
                       description=data.description, max_concurrency=data.max_concurrency,
                       env=data.env, skills=data.skills, model_name=data.model, enabled=data.enabled,
                       orchestrator=data.orchestrator, isolation=data.isolation,
                       permission=data.permission, actor=who.name)
    return Json(out, status_code=201)


@router.patch("/profiles/{name}", response_model=ProfileRow, responses=responses(400, 404))
def patch_profile(request: Request, data: ProfilePatch, name: str = Name,
                  who: Principal = Depends(current)) -> Response:
    who.check_admin()
    fields = data.model_dump(exclude_none=True)
    if not fields:
        raise InvalidInput("nothing to change")
    if "model" in fields:
        fields["model_name"] = fields.pop("model")
    return Json(profiles.update(state(request).db, name, actor=who.name, **fields))


@router.post("/profiles/{name}/check", response_model=ProfileCheck, responses=responses(403, 404))
def check_profile(request: Request, name: str = Name, run: bool = True,
                  who: Principal = Depends(current)) -> Response:
    """Would this profile's agent start (``profiles check``): executable and version, the command
    line (prompt elided), the flags accepted by the CLI (``run=false`` skips starting it), MCP
    wiring, credentials; each failed check with its fix. Starting a program on the host: an
    administrator's, and a POST, so a browser session needs the CSRF header (``X-Agentboard: 1``)
    or a same-origin ``Origin``: a link or an image on another site cannot start it."""
    who.check_admin()
    from ...dispatch import profile_check

    st = state(request)
    row = profiles.get(st.db, name)
    return Json(profile_check.check_profiles([row], st.settings, run=run)[0].to_dict())


@router.delete("/profiles/{name}", response_model=ProfileRow, responses=responses(400, 404, 409))
def remove_profile(request: Request, name: str = Name, who: Principal = Depends(current)) -> Response:
    who.check_admin()
    return Json(profiles.remove(state(request).db, name, actor=who.name))
