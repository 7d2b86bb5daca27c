"""The ``channels:`` section: where notifications go, from nodes to specs."""

from dataclasses import dataclass, field

from django.core.exceptions import ValidationError

from apps.alerts.channel_clean import channel_clean
from apps.alerts.config_as_code.common import check_unique, line_of, read_slug
from apps.alerts.models import ChannelKind, WebhookFormat
from apps.alerts.rule_clean import continued
from apps.pipelines.config_as_code.loader import Item, Node, Scalar, Sequence
from apps.pipelines.config_as_code.reader import Reader, describe
from apps.pipelines.environment import ENV_NAME

CHANNEL_KEYS = ("slug", "name", "kind", "url", "secret_env", "format", "to")
WEBHOOK_ONLY = ("url", "secret_env", "format")
EMAIL_ONLY = ("to",)


@dataclass(frozen=True)
class ChannelSpec:
    line: int
    slug: str
    kind: str
    slug_line: int = 0
    name: str = ""
    email_to: tuple[str, ...] = ()
    url: str = ""
    url_line: int = 0
    format: str = WebhookFormat.NATIVE
    secret_env: str = ""
    secret_env_line: int = 0
    # False when the file may not read this variable (applied in the browser): it was
    # never looked up, and only the variable the channel already has may be named.
    secret_env_read: bool = True
    # Read from ``secret_env`` when the file is read; "" keeps the stored secret.
    secret: str = field(default="", repr=False)


@dataclass(frozen=True)
class ChannelsSpec:
    line: int
    channels: list[ChannelSpec]

    def slugs(self) -> set[str]:
        return {channel.slug for channel in self.channels}


def _check_url(value: str) -> None:
    channel_clean({"url": value})


def _check_env_name(value: str) -> None:
    if not ENV_NAME.fullmatch(value):
        raise ValidationError(
            f"“{value}” is not an environment variable name (letters, digits and _, "
            "not starting with a digit)."
        )


def _addresses(reader: Reader, item: Item) -> tuple[str, ...]:
    # One address may stand alone; several make a list.
    if isinstance(item.value, Scalar):
        nodes: list[Node] = [item.value]
    else:
        nodes = reader.sequence(item, what="e-mail addresses")
        if isinstance(item.value, Sequence) and not nodes:
            reader.error(item.value.line, "“to” needs at least one address.")
    addresses: list[str] = []
    lines: list[int] = []
    seen: dict[str, int] = {}
    for node in nodes:
        if not isinstance(node, Scalar) or not isinstance(node.value, str):
            reader.error(node.line, f"An e-mail address must be text, not {describe(node)}.")
            continue
        address = node.value.strip()
        if address.lower() in seen:
            first = seen[address.lower()]
            reader.error(node.line, f"Duplicate address “{address}” (first at line {first}).")
            continue
        seen[address.lower()] = node.line
        addresses.append(address)
        lines.append(node.line)
    if not addresses:
        return ()
    try:
        return tuple(channel_clean({"email_to": addresses})["email_to"])
    except ValidationError as exc:
        for error in exc.error_dict["email_to"]:
            index = (error.params or {}).get("index")
            line = lines[index] if isinstance(index, int) else item.value.line
            reader.error(line, " ".join(error.messages))
        return ()


def _secret(reader: Reader, item: Item) -> tuple[str, str, bool]:
    """The variable's name, the secret it holds, and whether it could be read here; the
    value never goes into a message."""
    name = reader.text(item, max_length=100, check=_check_env_name)
    if name is None:
        return "", "", True
    if not reader.environment.readable(name):
        # Not looked up: whether it exists is not for this file to learn.
        return name, "", False
    found = reader.environment.read(name)
    value = (found or "").strip()
    if not value:
        state = "is not set" if found is None else "is empty"
        reader.error(
            item.value.line,
            f"The environment variable “{name}” {state}: it must hold this channel's "
            "signing secret when the file is previewed or applied.",
        )
    else:
        try:
            channel_clean({"secret": value})
        except ValidationError as exc:
            reader.error(
                item.value.line,
                f"The environment variable “{name}” does not hold a signing secret: "
                + continued(" ".join(exc.messages)),
            )
            value = ""
    return name, value, True


def _misplaced(reader: Reader, entries: dict[str, Item], kind: str) -> None:
    """Keys of the other kind are mistakes, not something to ignore."""
    other, owner = (
        (EMAIL_ONLY, "e-mail channels")
        if kind == ChannelKind.WEBHOOK
        else (WEBHOOK_ONLY, "webhooks")
    )
    for key in other:
        if key in entries:
            reader.error(
                entries[key].key_line, f"“{key}” is only for {owner}, not {kind} channels."
            )


def _channel(reader: Reader, node: Node) -> ChannelSpec:
    entries = reader.mapping(node, what="channel", keys=CHANNEL_KEYS, required=("slug", "kind"))
    if entries is None:
        return ChannelSpec(node.line, "", "")
    kind = (reader.choice(entries["kind"], ChannelKind.values) if "kind" in entries else None) or ""
    name = (reader.text(entries["name"], max_length=100) or "") if "name" in entries else ""
    url, format_, secret_env, secret = "", WebhookFormat.NATIVE.value, "", ""
    secret_env_read = True
    email_to: tuple[str, ...] = ()
    if kind:
        _misplaced(reader, entries, kind)
        required = "url" if kind == ChannelKind.WEBHOOK else "to"
        if required not in entries:
            article = "A" if kind == ChannelKind.WEBHOOK else "An"
            reader.error(node.line, f"{article} {kind} channel needs “{required}”.")
    if kind == ChannelKind.WEBHOOK:
        if "url" in entries:
            url = (reader.text(entries["url"], max_length=2000, check=_check_url) or "").strip()
        if "format" in entries:
            format_ = reader.choice(entries["format"], WebhookFormat.values) or format_
        if "secret_env" in entries:
            secret_env, secret, secret_env_read = _secret(reader, entries["secret_env"])
    elif kind == ChannelKind.EMAIL and "to" in entries:
        email_to = _addresses(reader, entries["to"])
    return ChannelSpec(
        line=node.line,
        slug=read_slug(reader, entries.get("slug")),
        kind=kind,
        slug_line=line_of(entries.get("slug"), node),
        name=name,
        email_to=email_to,
        url=url,
        url_line=line_of(entries.get("url"), node),
        format=format_,
        secret_env=secret_env,
        secret_env_line=line_of(entries.get("secret_env"), node),
        secret_env_read=secret_env_read,
        secret=secret,
    )


def parse_channels(item: Item, reader: Reader) -> ChannelsSpec:
    channels = [_channel(reader, node) for node in reader.sequence(item, what="channels")]
    check_unique(reader, [(c.slug, c.slug_line) for c in channels], "channel slug")
    return ChannelsSpec(line=item.key_line, channels=channels)
