"""The catalog map: which engine catalog is which metastore (METASTORE_CATALOGS_FILE).

Trino names a table `<catalog>.<schema>.<table>` under its coordinator's namespace; the
Hive metastore behind that catalog names it `<schema>.<table>` under `hive://host:port`.
An operator declares the pairs in a YAML file:

    catalogs:
      - engine: "trino://trino-coordinator-*:8443"  # engine namespace, exact or a glob
        catalog: lakehouse
        metastore: "hive://hive-metastore:9083"

and the datasets projection joins each engine name to its metastore name (see
projections/decode.py, `catalog_link`). The file is read once, at start; a mistake stops
the process with one line naming the file's line.
"""

from __future__ import annotations

import fnmatch
import hashlib
from urllib.parse import urlsplit

import msgspec
import yaml

from metastore.setting_files import read_text

VARIABLE = "METASTORE_CATALOGS_FILE"
KEYS = ("engine", "catalog", "metastore")
GLOB_CHARACTERS = frozenset("*?[")


class CatalogFileError(ValueError):
    """The catalogs file is wrong; the message names the variable, the file and the line.

    (config.load_settings reports it as a ConfigError.)
    """


class CatalogEntry(msgspec.Struct, frozen=True):
    """One pair: names in `catalog` under an engine namespace matching `engine` are the
    metastore's names under `metastore`, without the catalog's prefix."""

    engine: str  # an engine namespace, exact or an fnmatch glob (`*`, `?`, `[...]`)
    catalog: str
    metastore: str  # the metastore's namespace (thrift:// is written as hive://)
    line: int = 0  # where it stands in the file (for messages; not part of its meaning)


class CatalogMatch(msgspec.Struct, frozen=True):
    index: int  # the entry's position in the file's `catalogs` list, from 0
    entry: CatalogEntry
    name: str  # the metastore's name of the table


class CatalogMap:
    """The declared entries, looked up by catalog; the first entry that matches wins."""

    def __init__(self, entries: tuple[CatalogEntry, ...] = (), source: str | None = None) -> None:
        self.entries = entries
        self.source = source
        self._by_catalog: dict[str, list[tuple[int, CatalogEntry]]] = {}
        for index, entry in enumerate(entries):
            self._by_catalog.setdefault(entry.catalog, []).append((index, entry))

    def __bool__(self) -> bool:
        return bool(self.entries)

    def __repr__(self) -> str:
        return f"CatalogMap({len(self.entries)} entries from {self.source!r})"

    @property
    def fingerprint(self) -> str:
        """What the datasets were derived with: '' for no map, else a hash of the entries
        in order (their lines and the file's comments and layout do not count)."""
        if not self.entries:
            return ""
        meaning = [[e.engine, e.catalog, e.metastore] for e in self.entries]
        return hashlib.sha256(msgspec.json.encode(meaning)).hexdigest()

    def match(self, namespace: str, name: str) -> CatalogMatch | None:
        """The metastore's name of engine name `namespace`/`name`, by the first entry whose
        catalog prefixes the name and whose engine matches the namespace."""
        catalog, dot, rest = name.partition(".")
        if not dot or not rest:
            return None
        candidates = self._by_catalog.get(catalog)
        if not candidates:
            return None
        for index, entry in candidates:
            if entry.engine == namespace or (
                GLOB_CHARACTERS.intersection(entry.engine)
                and fnmatch.fnmatchcase(namespace, entry.engine)
            ):
                return CatalogMatch(index, entry, rest)
        return None


NO_CATALOGS = CatalogMap()


def metastore_namespace(uri: str) -> str | None:
    """The OpenLineage namespace of a Hive metastore URI: `hive://host:port`.

    `thrift://` (how Hive, Spark and Stackable's discovery ConfigMaps write it) and
    `hive://` (OpenLineage's naming) are the same metastore. Other schemes: None.
    """
    try:
        parts = urlsplit(uri.strip())
    except ValueError:
        return None
    if parts.scheme not in ("thrift", "hive") or not parts.netloc:
        return None
    return f"hive://{parts.netloc}"


def _fail(path: str, line: int, message: str) -> CatalogFileError:
    return CatalogFileError(f"{VARIABLE}={path!r} line {line}: {message}")


def _string(path: str, node: yaml.Node, where: str) -> str:
    if (
        not isinstance(node, yaml.ScalarNode)
        or node.tag != "tag:yaml.org,2002:str"
        or not str(node.value).strip()
    ):
        raise _fail(path, node.start_mark.line + 1, f"{where}: expected a non-empty string")
    return str(node.value).strip()


def parse_catalog_map(text: str, path: str) -> CatalogMap:
    """The map in `text` (the file at `path`); CatalogFileError naming the line when wrong."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else 1
        problem = exc.problem or exc.context or "not YAML"
        raise _fail(path, line, f"not valid YAML: {problem}") from None
    except yaml.YAMLError as exc:
        raise _fail(path, 1, f"not valid YAML: {exc}") from None
    if not isinstance(root, yaml.MappingNode):
        line = root.start_mark.line + 1 if root is not None else 1
        raise _fail(path, line, "expected a mapping with a `catalogs` list")
    listing: yaml.Node | None = None
    for key, value in root.value:
        name = _string(path, key, "a key")
        if name != "catalogs":
            raise _fail(path, key.start_mark.line + 1, f"unknown key {name!r} (expected catalogs)")
        listing = value
    if listing is None:
        raise _fail(path, root.start_mark.line + 1, "expected a `catalogs` list")
    if isinstance(listing, yaml.ScalarNode) and listing.tag == "tag:yaml.org,2002:null":
        return CatalogMap((), path)
    if not isinstance(listing, yaml.SequenceNode):
        raise _fail(path, listing.start_mark.line + 1, "catalogs: expected a list")
    entries: list[CatalogEntry] = []
    seen: dict[tuple[str, str], int] = {}
    for index, item in enumerate(listing.value):
        where = f"catalogs[{index}]"
        line = item.start_mark.line + 1
        if not isinstance(item, yaml.MappingNode):
            raise _fail(path, line, f"{where}: expected a mapping with {', '.join(KEYS)}")
        values: dict[str, str] = {}
        for key, value in item.value:
            name = _string(path, key, f"{where}: a key")
            if name not in KEYS:
                raise _fail(
                    path,
                    key.start_mark.line + 1,
                    f"{where}: unknown key {name!r} (expected {', '.join(KEYS)})",
                )
            if name in values:
                raise _fail(path, key.start_mark.line + 1, f"{where}.{name}: given twice")
            values[name] = _string(path, value, f"{where}.{name}")
        missing = [k for k in KEYS if k not in values]
        if missing:
            raise _fail(path, line, f"{where}: {', '.join(missing)} missing")
        if "." in values["catalog"]:
            raise _fail(path, line, f"{where}.catalog: a catalog name has no '.'")
        metastore = values["metastore"]
        if metastore.startswith("thrift://"):
            metastore = metastore_namespace(metastore) or metastore
        if values["engine"] == metastore:
            raise _fail(path, line, f"{where}: engine and metastore are the same namespace")
        pair = (values["engine"], values["catalog"])
        if pair in seen:
            raise _fail(
                path, line, f"{where}: engine and catalog repeat the entry of line {seen[pair]}"
            )
        seen[pair] = line
        entries.append(CatalogEntry(values["engine"], values["catalog"], metastore, line))
    return CatalogMap(tuple(entries), path)


def load_catalog_map(path: str) -> CatalogMap:
    """The map in the file at `path` ('' or unset: no map)."""
    if not path:
        return NO_CATALOGS
    return parse_catalog_map(read_text(VARIABLE, path, CatalogFileError), path)
