"""Where a notification may go: public addresses only, unless an administrator said otherwise.

A person with a member token can aim the server at any Apprise URL (a subscription, a test
message). Without a rule that is a way to make the server send requests to itself or to the
private network behind it (``json://127.0.0.1:6379/?+Header=x``, ``form://10.0.0.5/?:method=GET``,
``json://169.254.169.254/``), and the error text of a failed delivery would tell open, closed and
non-HTTP ports apart. So a target that is not *trusted* (subscribed by someone else than an
unscoped administrator, the local CLI or ``notify_default``):

- may not use a plugin that reads local files or talks to the local machine (desktop
  notifications, syslog, a template or key file named in the URL), nor one whose connections do
  not go through Python's resolver (raw UDP, asyncio clients), see :func:`check`;
- is resolved when it is saved, and every address its host resolves to must be public (not
  loopback, private, link-local, unique-local, multicast, reserved, unspecified, shared or a
  cloud metadata address), unless the host is in the ``notify_allow_hosts`` setting;
- is resolved again for every connection the delivery makes (:func:`guarded`): the addresses
  are filtered as above right where the connection picks them, so a name that resolves to a
  public address when saved and to ``127.0.0.1`` later (DNS rebinding) connects nowhere;
- gets a generic error (:data:`GENERIC_ERROR`), never the plugin's own text.
"""

from __future__ import annotations

import contextlib
import contextvars
import ipaddress
import socket
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from ..domain.errors import Forbidden

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

#: what a person who did not subscribe as an administrator sees when a delivery fails: the same
#: words whatever happened (refused, unreachable, closed port, timeout), so it reveals nothing
#: about the network behind the server
GENERIC_ERROR = "the target did not accept the message (unreachable, refused or not an allowed address)"

#: plugins that act on the local machine (desktop notifications, syslog, a USB light)
LOCAL_SCHEMES = frozenset({"dbus", "kde", "qt", "glib", "gio", "gnome", "macosx", "windows", "syslog", "blink1"})
#: plugins whose connections bypass Python's resolver (raw UDP, asyncio clients), so the
#: per-connection check cannot see them
UNGUARDED_SCHEMES = frozenset({"rsyslog", "xmpp", "xmpps", "nostr", "aprs"})
#: URL parameters that name a local file a plugin reads (a message template, a key, an attachment)
FILE_PARAMS = frozenset({"template", "keyfile", "subfile", "pgpkey", "pgp_key", "attach", "attachment",
                         "cert", "certfile", "ca_cert", "ca_certs", "cafile", "path", "file", "config"})

#: plugins whose URL host is the server they connect to (resolved when a target is saved; a
#: service's other plugins carry tokens there and connect to the service's own public hosts)
HOST_SCHEMES = frozenset({
    "json", "jsons", "xml", "xmls", "form", "forms", "ntfy", "ntfys", "gotify", "gotifys", "apprise",
    "apprises", "matrix", "matrixs", "mailto", "mailtos", "mmost", "mmosts", "rocket", "rockets", "ncloud",
    "nclouds", "nctalk", "nctalks", "emby", "embys", "jellyfin", "jellyfins", "kodi", "kodis", "xbmc", "xbmcs",
    "hassio", "hassios", "synology", "synologys", "signal", "signals", "mastodon", "mastodons", "toot",
    "toots", "misskey", "misskeys", "gorush", "gorushs", "lametric", "lametrics", "opsimate", "opsimates",
    "humhub", "humhubs", "enigma2", "enigma2s", "parsep", "parseps", "smseagle", "smseagles", "notica",
    "noticas", "goalert", "goalerts", "pjet", "pjets", "bark", "barks", "evolution", "evolutions", "mqtt",
    "mqtts", "growl", "irc", "ircs", "smpp", "smpps", "onebot", "onebots", "deltachat", "deltachats",
    "zulip", "http", "https",
})
#: URL parameters that name a server to connect to (an e-mail target's ``smtp=``)
HOST_PARAMS = frozenset({"smtp", "host", "server", "proxy"})
#: addresses that are never public whatever the tables say: cloud metadata services
METADATA = (ipaddress.ip_network("169.254.169.254/32"), ipaddress.ip_network("fd00:ec2::254/128"),
            ipaddress.ip_network("100.100.100.200/32"))


def public(address: IPAddress) -> bool:
    """Whether ``address`` is a public unicast address (IPv6 forms that carry an IPv4 address
    are judged by it)."""
    if isinstance(address, ipaddress.IPv6Address):
        inner = address.ipv4_mapped or address.sixtofour
        if inner is None and address.teredo is not None:
            inner = address.teredo[1]
        if inner is None and address in ipaddress.ip_network("64:ff9b::/96"):
            inner = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if inner is not None and not public(inner):
            return False
    if any(address in net for net in METADATA):
        return False
    return bool(address.is_global and not address.is_multicast and not address.is_reserved
                and not address.is_unspecified and not address.is_loopback and not address.is_link_local)


@dataclass(frozen=True)
class Policy:
    """The hosts an untrusted target may reach besides public addresses (``notify_allow_hosts``:
    host names, IP addresses or networks such as ``10.0.0.0/8``)."""

    names: frozenset[str] = frozenset()
    networks: tuple[IPNetwork, ...] = ()

    @classmethod
    def of(cls, allow_hosts: Iterable[str] = ()) -> Policy:
        names: set[str] = set()
        nets: list[IPNetwork] = []
        for raw in allow_hosts:
            item = str(raw).strip().strip("[]")
            if not item:
                continue
            try:
                nets.append(ipaddress.ip_network(item, strict=False))
            except ValueError:
                names.add(item.lower().rstrip("."))
        return cls(frozenset(names), tuple(nets))

    def permits(self, host: str, address: str) -> bool:
        """Whether a connection to ``address`` (which ``host`` resolved to) may be made."""
        name = (host or "").lower().rstrip(".").strip("[]")
        if name in self.names:
            return True
        try:
            ip = ipaddress.ip_address(address.split("%", 1)[0])
        except ValueError:
            return False
        return public(ip) or any(ip in net for net in self.networks if net.version == ip.version)


# -- the check when a target is saved -----------------------------------------------------------


def _refuse(why: str) -> Forbidden:
    return Forbidden(f"notification target refused: {why}; an administrator can subscribe it, or allow "
                     "its host in the notify_allow_hosts setting")


def check(url: str, policy: Policy) -> None:
    """Refuse an untrusted target: a local or unguarded plugin, a parameter naming a local file,
    a host that does not resolve or resolves to an address that is not public (and not allowed).
    The message says which rule, never whether anything answers there."""
    text = (url or "").strip()
    scheme = text.split("://", 1)[0].lower()
    if scheme in LOCAL_SCHEMES or scheme in UNGUARDED_SCHEMES or scheme == "file":
        raise _refuse(f"{scheme}:// acts on the server itself or cannot be checked")
    try:
        parts = urlsplit(text)
        host = parts.hostname or ""
    except ValueError:
        raise _refuse("the URL cannot be read") from None
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        name = key.lstrip("+-:").lower()
        low = value.strip().lower()
        if name in FILE_PARAMS or low.startswith(("file:", "/", "~", "\\")) or "../" in low:
            raise _refuse(f"the parameter {key!r} names a file on the server")
        if name in HOST_PARAMS and value.strip():
            _check_host(value.strip().split(":", 1)[0], policy)
    if not host or not (scheme in HOST_SCHEMES or "." in host or ":" in host):
        return  # a token in the host's place; the connection is still checked when it is made
    _check_host(host, policy)


def _check_host(host: str, policy: Policy) -> None:
    for address in resolve(host):
        if not policy.permits(host, address):
            raise _refuse(f"{host} is not a public address")


def resolve(host: str) -> list[str]:
    """Every address ``host`` resolves to (an IP literal resolves to itself); refused when it
    does not resolve."""
    try:
        infos = _REAL_GETADDRINFO(host, None, 0, socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        raise _refuse(f"{host} does not resolve") from None
    return sorted({str(info[4][0]) for info in infos})


# -- the check on every connection a delivery makes ----------------------------------------------


_REAL_GETADDRINFO = socket.getaddrinfo
_POLICY: contextvars.ContextVar[Policy | None] = contextvars.ContextVar("agentboard_notify_policy", default=None)
_installed = False
_install_lock = threading.Lock()


def _getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
    infos = _REAL_GETADDRINFO(host, port, *args, **kwargs)
    policy = _POLICY.get()
    if policy is None:
        return infos
    name = host.decode("idna") if isinstance(host, bytes) else str(host or "")
    kept = [info for info in infos if policy.permits(name, str(info[4][0]))]
    if not kept:
        raise socket.gaierror(socket.EAI_NONAME, "not an allowed address")
    return kept


def _install() -> None:
    """Route Python's resolver through :func:`_getaddrinfo` (once per process). Outside a
    :func:`guarded` block it answers exactly as before."""
    global _installed
    with _install_lock:
        if not _installed:
            socket.getaddrinfo = _getaddrinfo
            _installed = True


@contextlib.contextmanager
def guarded(policy: Policy | None) -> Iterator[None]:
    """Inside this block (and in the threads Apprise starts from it, which copy the context),
    every connection made through Python's resolver goes only to addresses ``policy`` permits.
    ``None``: a trusted target, no filter."""
    if policy is None:
        yield
        return
    _install()
    token = _POLICY.set(policy)
    try:
        yield
    finally:
        _POLICY.reset(token)
