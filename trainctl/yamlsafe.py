"""Bounded YAML: every YAML text that enters trainctl is read and parsed here.

Values files (``submit -f``), ``apply -f`` documents, ``--set`` values and the text a
template renders all go through :func:`read_text` and :func:`load_one` /
:func:`load_all`, which hold the promise "one-line error, exit 2, within a second or
two" for hostile input as well as for typos:

* **Size**: at most :data:`MAX_INPUT_BYTES` are ever read from a file or stdin, so
  ``-f /dev/zero`` ends at once (the API server takes 3 MiB per request anyway), and a FIFO
  nobody writes to reads as empty instead of blocking.
* **Encoding**: UTF-8 (a BOM is allowed), or UTF-16/UTF-32 with a BOM as the YAML spec
  requires; anything else is refused naming the first bad byte and its offset.
* **Aliases and depth**: before any Python object is built, the parser's event stream
  is walked once (no recursion) counting every node, and every character of a scalar, as
  if aliases were expanded. A "billion laughs" document is a few hundred bytes whose
  expansion is billions of nodes: it stops at :data:`MAX_NODES`. One long string named by
  an alias many times is few nodes but many bytes (1 MB of text, 100 MB of job, as long to
  validate and print): it stops at :data:`MAX_EXPANDED_CHARS`, the size a file may have,
  so aliases still save typing but never amplify. Anchors as upstream examples and values
  files use them load as before (Kubernetes accepts aliases). Nesting deeper than
  :data:`MAX_DEPTH` and an alias inside its own anchor (a cycle) are refused too, so
  nothing downstream can recurse or loop on them.
* **Duplicate keys**: a key twice in one mapping, at any depth, is refused naming the key
  and both lines, as kubectl refuses it; PyYAML would keep the last silently (``replicas``
  given twice). Keys are compared as the composer resolves them: ``a`` and ``'a'`` are one
  key, ``1`` and ``'1'`` two; YAML's merge key ``<<`` brings values the mapping's own keys
  may override.
* **JSON values only**: a resource is JSON on its way to the API server, so the YAML
  types JSON lacks (timestamps, ``!!binary``, ``!!set``, ``!!omap``, ``!!pairs``,
  ``.inf``/``.nan``) are refused where they are read, with the line; quoting keeps a
  date as the string it looks like. Integers longer than Python's 4300-digit
  conversion limit are refused the same way.

libyaml (``CSafeLoader``) parses when it is installed: it is about ten times faster than
the pure-Python parser, which matters for large legal input. :data:`MAX_NODES` is far above
any real job (a pod template is a few hundred values; a cluster stores at most 1.5 MiB per
object) and low enough that everything after loading stays well under a second.
"""

from __future__ import annotations

import codecs
import functools
import math
import os
import sys
from dataclasses import dataclass

from trainctl.errors import UserError, shortened

MAX_INPUT_BYTES = 4 * 1024 * 1024
MAX_NODES = 100_000
MAX_DEPTH = 64
MAX_EXPANDED_CHARS = MAX_INPUT_BYTES  # characters of values once aliases are expanded: what no alias may amplify

# Longest BOMs first: the UTF-32-LE BOM starts with the UTF-16-LE one.
BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"),
)
NOT_JSON = {"timestamp": "a timestamp", "binary": "!!binary data", "set": "a !!set",
            "omap": "an !!omap", "pairs": "!!pairs"}


def read_text(filename: str, flag: str = "-f") -> str:
    """The decoded text of ``filename`` (``-`` is stdin); never reads more than the limit."""
    where = f"{flag} {filename}"
    try:
        if filename == "-":
            stdin = getattr(sys.stdin, "buffer", None)
            data = stdin.read(MAX_INPUT_BYTES + 1) if stdin else sys.stdin.read(MAX_INPUT_BYTES + 1).encode()
        else:
            data = read_file(filename, MAX_INPUT_BYTES + 1)
    except OSError as err:
        raise UserError(f"{where}: cannot read ({err.strerror or err})") from None
    if len(data) > MAX_INPUT_BYTES:
        raise UserError(f"{where}: larger than {MAX_INPUT_BYTES // 2**20} MiB: split it into smaller files "
                        "(one job is at most 1.5 MiB on a cluster)")
    return decode(data, where)


def read_file(filename: str, limit: int) -> bytes:
    """At most ``limit`` bytes of ``filename``. Opened non-blocking, because opening a FIFO no process
    writes to would wait forever; so opened, it reads as empty (no writer), or, once reads block again,
    as the pipe it is (``-f <(helm template ...)``)."""
    descriptor = os.open(filename, os.O_RDONLY | os.O_NONBLOCK)
    os.set_blocking(descriptor, True)
    with os.fdopen(descriptor, "rb") as file:
        return file.read(limit)


def decode(data: bytes, where: str) -> str:
    """UTF-8, or UTF-16/32 announced by a BOM; one line naming the first bad byte otherwise."""
    encoding = next((name for bom, name in BOMS if data.startswith(bom)), "utf-8")
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as err:
        label = encoding.removesuffix("-sig").upper()
        raise UserError(f"{where}: not {label} (byte 0x{data[err.start]:02x} at offset {err.start}): "
                        "save it as UTF-8") from None


def load_one(text: str, where: str) -> object:
    """The single YAML document in ``text`` (None when empty), within the limits above."""
    documents = _load(text, where)
    if len(documents) > 1:
        raise UserError(f"{where}: expected one YAML document, found {len(documents)}")
    return documents[0] if documents else None


def load_all(text: str, where: str) -> list:
    """Every YAML document in ``text``, within the limits above."""
    return _load(text, where)


def _load(text: str, where: str) -> list:
    import yaml

    loader_class = _loader_class()
    try:
        check_shape(yaml.parse(text, Loader=loader_class), where)
        loader = loader_class(text)
        try:
            documents = []
            while loader.check_data():
                documents.append(loader.get_data())
            return documents
        finally:
            loader.dispose()
    except yaml.YAMLError as err:
        raise UserError(f"{where}: not valid YAML{_line_of(err)}: {_problem_of(err)}") from None
    except UnicodeEncodeError as err:  # a lone surrogate: only reachable from a str built in Python
        raise UserError(f"{where}: not valid Unicode ({err.reason} at character {err.start})") from None


def check_shape(events, where: str) -> None:
    """Refuse too many values or characters (aliases expanded), too deep nesting, cyclic aliases and a key twice in
    one mapping, from events alone."""
    import yaml

    shape = _Shape(where)
    for event in events:
        if isinstance(event, yaml.AliasEvent):
            shape.alias(event)
        elif isinstance(event, yaml.ScalarEvent):
            shape.scalar(event)
        elif isinstance(event, yaml.CollectionStartEvent):
            shape.start(event, isinstance(event, yaml.MappingStartEvent))
        elif isinstance(event, yaml.CollectionEndEvent):
            shape.end()
        shape.check_budget(event)


@dataclass
class _Anchored:
    nodes: int  # values, counting the collection itself
    chars: int  # characters of its scalars
    key: tuple | None  # a scalar's identity as a mapping key


@dataclass
class _Open:
    anchor: str | None
    nodes: int  # the counts when it opened
    chars: int
    keys: dict | None  # a mapping's keys so far (identity: line), None for a sequence
    next_is_key: bool = True


class _Shape:
    """The counts :func:`check_shape` keeps while it walks a stream's events once, without recursion."""

    def __init__(self, where: str) -> None:
        import yaml

        self.where = where
        self.nodes = self.chars = 0
        self.open: list[_Open] = []
        self.anchors: dict[str, _Anchored] = {}
        self.resolver = yaml.resolver.Resolver()

    def alias(self, event) -> None:
        anchored = self.anchors.get(event.anchor)
        if anchored is None:
            raise UserError(f"{self.where}: alias *{event.anchor}{_line_of(event)} refers to no complete anchor "
                            "(undefined, or one of its own parents)")
        self.placed(event, anchored.key)
        self.nodes += anchored.nodes
        self.chars += anchored.chars

    def scalar(self, event) -> None:
        in_key = bool(self.open) and self.open[-1].keys is not None and self.open[-1].next_is_key
        key = self.key_of(event) if in_key or event.anchor else None
        self.placed(event, key)
        self.nodes += 1
        self.chars += len(event.value)
        if event.anchor:
            self.anchors[event.anchor] = _Anchored(1, len(event.value), key)

    def start(self, event, mapping: bool) -> None:
        self.placed(event, None)
        self.nodes += 1
        self.open.append(_Open(event.anchor, self.nodes, self.chars, {} if mapping else None))
        if len(self.open) > MAX_DEPTH:
            raise UserError(f"{self.where}: nested deeper than {MAX_DEPTH} levels{_line_of(event)}")

    def end(self) -> None:
        closed = self.open.pop()
        if closed.anchor:
            self.anchors[closed.anchor] = _Anchored(self.nodes - closed.nodes + 1, self.chars - closed.chars, None)

    def placed(self, event, key: tuple | None) -> None:
        """A node begins in the open collection: in a mapping, every other one is a key, which must be new there
        (a collection as a key has no identity here; the constructor refuses it as unhashable)."""
        parent = self.open[-1] if self.open else None
        if parent is None or parent.keys is None:
            return
        if parent.next_is_key and key is not None:
            if key in parent.keys:
                raise UserError(f"{self.where}: key {shortened(repr(key[1]))}{_line_of(event)} appears twice in one "
                                f"mapping (first at line {parent.keys[key]}): keep one")
            parent.keys[key] = event.start_mark.line + 1
        parent.next_is_key = not parent.next_is_key

    def key_of(self, event) -> tuple | None:
        """What a scalar is as a key: its resolved tag and its text (``a`` and ``'a'`` are one key; ``1`` and
        ``'1'`` two); None for YAML's merge key ``<<``, whose values a mapping's own keys may override."""
        import yaml

        tag = event.tag
        if tag in (None, "!"):  # as the composer resolves it
            tag = self.resolver.resolve(yaml.ScalarNode, event.value, event.implicit)
        return None if tag == "tag:yaml.org,2002:merge" else (tag, event.value)

    def check_budget(self, event) -> None:
        if self.nodes > MAX_NODES:
            raise UserError(f"{self.where}: more than {MAX_NODES:,} values once aliases are expanded"
                            f"{_line_of(event)}; write the values out or split the file")
        if self.chars > MAX_EXPANDED_CHARS:
            raise UserError(f"{self.where}: more than {MAX_EXPANDED_CHARS // 2**20} MiB of text once aliases are "
                            f"expanded{_line_of(event)}; write the values out or split the file")


def _line_of(error_or_event) -> str:
    mark = getattr(error_or_event, "problem_mark", None) or getattr(error_or_event, "start_mark", None)
    return f" at line {mark.line + 1}" if mark else ""


def _problem_of(err) -> str:
    return getattr(err, "problem", None) or str(err).splitlines()[0]


@functools.cache
def _loader_class():
    """A safe loader (libyaml's when available) that builds JSON values only."""
    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    loader = type("JSONValuesLoader", (base,), {})  # add_constructor copies the table: base stays as it is
    for tag, description in NOT_JSON.items():
        loader.add_constructor(f"tag:yaml.org,2002:{tag}", _refuser(description))
    loader.add_constructor("tag:yaml.org,2002:int", _construct_int)
    loader.add_constructor("tag:yaml.org,2002:float", _construct_float)
    return loader


def _refuser(description: str):
    def refuse(loader, node):
        import yaml

        raise yaml.constructor.ConstructorError(
            None, None, f"{description} ({node.value if isinstance(node.value, str) else '...'}) is not a JSON value: "
            "quote it to keep it as a string", node.start_mark)
    return refuse


def _construct_int(loader, node):
    import yaml

    try:
        return yaml.constructor.SafeConstructor.construct_yaml_int(loader, node)
    except ValueError:  # Python refuses int() of more than 4300 digits (CVE-2020-10735)
        raise yaml.constructor.ConstructorError(
            None, None, f"an integer of {len(node.value)} digits is too large", node.start_mark) from None


def _construct_float(loader, node):
    import yaml

    value = yaml.constructor.SafeConstructor.construct_yaml_float(loader, node)
    if not math.isfinite(value):
        raise yaml.constructor.ConstructorError(
            None, None, f"{node.value} is not a JSON number: quote it to keep it as a string", node.start_mark)
    return value
