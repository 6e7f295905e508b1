"""Prefix caching: what a full cache block holds, fingerprinted, and the longest cached prefix.

Requests that share a prompt (a system prompt, a conversation so far, the same audio prefix)
share its full cache blocks instead of computing and storing them again, as vLLM's prefix
cache does (``vllm/v1/core/kv_cache_utils.py``, ``block_pool.py``,
``single_type_kv_cache_manager.py``, ``kv_cache_coordinator.py``). What a block holds is where
units go wrong, so it is typed here:

* **Content.** The caller says what each position holds, in the group's *kernel* unit:
  `ContentKeys` of `Tokens` (token ids) for a token group, of `EncoderTokens` for a pooled
  group (one key per encoder token: whatever identifies its input, e.g. a fingerprint of its
  audio frame). A pooled slot holds P encoder tokens of different content, so content is never
  keyed per `PooledBlocks`.
* **Block hashes.** One cache block of a group holds ``block_size`` slots: for a pooled group
  ``block_size × P`` encoder tokens (`kvunits.contracts.expand_block_size`), for a token group
  ``block_size`` tokens. `BlockHashes` fingerprints each *full* block, chained (the hash of
  block i covers blocks 0 .. i, as vLLM's ``hash_block_tokens`` chains its parent), with
  SHA-256, and carries its granularity and the handle it was made for: a group refuses hashes
  of another unit (mypy, and `UnitTypeError` at run time) or of another block size
  (`UnitValueError`), the bug class of vLLM #53142, where one group's block size cut another
  group's positions into blocks. The granularity also seeds the chain, so hashes made for one
  block size can never equal hashes made for another.
* **Lookup.** At admission, per group, the longest run of cached blocks the group's kind can
  use (`GroupCache.find`: full attention from the start; a sliding window only the blocks
  inside the window before the hit point, the others stand as the null block; chunked local
  attention only the current chunk). Groups that read one sequence (the same kernel unit: a
  model's token groups, or its encoder groups) must agree on one hit: vLLM's fixed point
  (`longest_common_hit`), each group lowering the candidate until none does, in steps of the
  least common multiple of their block sizes. A sequence of another unit (a speech model's
  audio against its text) has its own hit: kvunits steps each group's positions on their own,
  so a request may reuse its text and recompute its audio (vLLM, which runs both on one token
  axis, recomputes both). As in vLLM, the last position of the content is always recomputed
  (its output is needed), so a hit is at most ``len(content) − 1`` positions, whole blocks.
* **Sharing.** A hit block gains a reference (`kvunits.runtime.block_pool.BlockPool.touch`); a freed
  cached block keeps its content in the free queue until an allocation reuses it (then its
  hash is evicted: least recently used first). A hit never serves a block whose content
  differs: every block is found by the SHA-256 chain of everything before it and in it.

Only full blocks are cached, and only positions a step has *committed*: a speculative step's
lookahead positions are registered once a later step accepts them (`kvunits.runtime._core`).
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain, repeat
from math import lcm
from operator import countOf
from struct import error as StructError
from struct import pack_into
from typing import Any, Final, Generic, NamedTuple, NoReturn, TypeVar, final

from kvunits.contracts import (
    BlockSize,
    EncoderTokens,
    KernelUnit,
    ManagerSpec,
    PooledBlocks,
    Tokens,
    UnitTypeError,
    UnitValueError,
)
from kvunits.contracts.internal import cdiv, describe, magnitude, manager_ints

from .block_pool import NULL_BLOCK, BlockPool, CacheMap

#: The unit of the handle a `BlockHashes` was made for (see `kvunits.runtime.GroupHandle`).
HandleUnit = TypeVar("HandleUnit", PooledBlocks, Tokens, EncoderTokens)

#: Content keys are int64 (what a token id or a 64-bit fingerprint fits in).
_KEY_MIN: Final = -(2**63)
_KEY_MAX: Final = 2**63 - 1

#: One zero key: ``_ZERO * n`` is n of them, of exactly that size.
_ZERO: Final = array("q", [0])

#: Keys from which `ContentKeys` packs them with `struct` rather than ``array("q", ...)``:
#: the two cost the same at 32 (timed on CPython 3.11: 440 ns).
_PACKED: Final = 32

#: The kinds a prefix cache can serve (a cross-attention group is written whole from the
#: encoder's output, a state group holds one state: neither is a prefix of positions).
CACHEABLE_KINDS: Final = ("full_attention", "sliding_window", "chunked_local")


@final
class ContentKeys(Generic[KernelUnit]):
    """What each position of a sequence holds, in the kernel's unit: one int64 key per token
    (a token id) or per encoder token (a fingerprint of its input). Immutable: its keys are
    checked once, when made, and read as checked by every step after.

    Args:
        keys: one key per position, in order.
        unit: `Tokens` or `EncoderTokens`: the positions the keys are for.
        salt: mixed into the first block's hash (vLLM's ``cache_salt``, or a LoRA adapter's
            name): requests of different salts never share a block.

    Raises:
        UnitTypeError: ``unit`` is not `Tokens` or `EncoderTokens` (a pooled slot holds P
            positions of different content), or a key is not an int.
        UnitValueError: a key is outside int64.

    Example:
        >>> ContentKeys([7, 7, 9], Tokens).length
        Tokens(3)
    """

    __slots__ = ("_int64s", "salt", "unit")

    #: The keys as an int64 array, what the allocator reads (copied, never changed): one
    #: copy in C where a tuple's ints are parsed one by one.
    _int64s: array[int]
    unit: type[KernelUnit]
    salt: str | None

    def __init__(
        self, keys: Sequence[int], unit: type[KernelUnit], *, salt: str | None = None
    ) -> None:
        _check_unit(unit)  # checked at run time too: mypy's view is the annotation's
        values = keys if type(keys) is list or type(keys) is tuple else tuple(keys)
        # Every key an int of int64 (exactly int: not bool, not a numpy integer, what mypy
        # accepts), checked in C (a batch's tokens: hundreds a step, two passes: counting the
        # keys of class int costs a quarter less than a set of their classes) and packed into
        # the array kept, of exactly their size (one made from bytes keeps a sixteenth more):
        # from `_PACKED` keys on by `struct` (a quarter of what ``array("q", values)`` costs
        # at 256 keys: the array parses each item as a call's argument), below it by the
        # array (a generated token's one key: 180 ns against 490, the format's parse and
        # the arguments' tuple being most of struct's cost there). Other content is looked
        # at key by key for the message.
        count = len(values)
        if countOf(map(type, values), int) != count:
            _check_keys(values)
        try:
            if count < _PACKED:
                int64s = array("q", values)
            else:
                int64s = _ZERO * count
                pack_into(f"{count}q", int64s, 0, *values)
        except (StructError, OverflowError):
            _check_keys(values)
            raise  # the packer's own error, should the check find none
        if salt is not None and type(salt) is not str:
            raise UnitTypeError(
                f"salt is a str, got {describe(salt)}",
                field="salt",
                expected="str",
                got=describe(salt),
            )
        _set_int64s(self, int64s)
        _set_unit(self, unit)
        _set_salt(self, salt)

    # Immutable: the allocator's fast paths read ``keys`` once checked, never again.
    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError("ContentKeys is immutable: make a new one")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError("ContentKeys is immutable: make a new one")

    def __reduce__(self) -> tuple[Any, ...]:
        return (_content_keys, (self.keys, self.unit, self.salt))

    @property
    def keys(self) -> tuple[int, ...]:
        """One key per position, in order (a new tuple each read)."""
        return tuple(self._int64s)

    @property
    def length(self) -> KernelUnit:
        """Positions the keys cover."""
        return self.unit(len(self._int64s))

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is ContentKeys
            and other.unit is self.unit
            and other.salt == self.salt
            and other._int64s == self._int64s
        )

    def __hash__(self) -> int:
        return hash((self.unit, self.salt, self._int64s.tobytes()))

    def __repr__(self) -> str:
        salt = f", salt={self.salt!r}" if self.salt is not None else ""
        return f"ContentKeys({len(self._int64s)} keys, {self.unit.__name__}{salt})"


# The slots' setters, bound once: what __init__ writes through (__setattr__ refuses).
_set_int64s = ContentKeys.__dict__["_int64s"].__set__
_set_unit = ContentKeys.__dict__["unit"].__set__
_set_salt = ContentKeys.__dict__["salt"].__set__


def _content_keys(
    keys: tuple[int, ...], unit: type[KernelUnit], salt: str | None
) -> ContentKeys[KernelUnit]:
    """A pickled `ContentKeys`, made again (checked again)."""
    return ContentKeys(keys, unit, salt=salt)


def _check_keys(values: Sequence[object], of: str = "") -> None:
    """Raise for the first key that is not an int of int64 (``of``: the request's index in a
    batch, as the field names it)."""
    whose = f"request {of[1:-1]}'s content key" if of else "content key"
    for i, key in enumerate(values):
        if type(key) is not int:
            raise UnitTypeError(
                f"{whose} {i} is {describe(key)}; a key is an int64 (a token id, or a 64-bit "
                "fingerprint of an encoder token's input)",
                field=f"keys{of}[{i}]",
                expected="int64",
                got=describe(key),
            )
        if not _KEY_MIN <= key <= _KEY_MAX:
            raise UnitValueError(
                f"{whose} {i} is {key}, outside int64",
                field=f"keys{of}[{i}]",
                expected="int64",
                got=str(key),
            )


def _check_batch(per: Sequence[object]) -> None:
    """Raise for the first request of a batch whose keys are not a list or tuple, or the
    first key of the first request that is not an int of int64."""
    for r, one in enumerate(per):
        if type(one) is not list and type(one) is not tuple:
            raise UnitTypeError(
                f"request {r}'s content is {describe(one)}; give each request's keys as a "
                "list of ints",
                field=f"keys[{r}]",
                expected="list of int64",
                got=describe(one),
            )
        _check_keys(one, f"[{r}]")


def _check_unit(unit: object) -> None:
    """Raise unless ``unit`` is a unit content is keyed in (`Tokens`, `EncoderTokens`)."""
    if unit is not Tokens and unit is not EncoderTokens:
        hint = (
            ": a pooled slot holds P encoder tokens of different content, key each encoder "
            "token"
            if unit is PooledBlocks
            else ""
        )
        raise UnitTypeError(
            f"content is keyed per token or per encoder token, not {describe(unit)}{hint}",
            field="unit",
            expected="Tokens | EncoderTokens",
            got=describe(unit),
        )


@final
class ContentBatch(Generic[KernelUnit]):
    """What one sequence's positions hold for each request of an engine step's batch, in the
    kernel's unit: one list of int64 keys per request, in request order (what each request's
    latest step produced: its accepted drafts and the token sampled after them, or their
    audio; empty where it produced nothing). The batch form of `ContentKeys` for
    `kvunits.runtime.Stepper.advance_speculative_all_with_content`: the whole batch's keys are
    checked and packed in passes in C, and each request's share cut from them, where a
    `ContentKeys` per request costs an object and its checks each. Immutable. No salt: a salt
    goes in a request's first block, at admission.

    Args:
        keys: per request, its keys in order (a list or tuple of ints each).
        unit: `Tokens` or `EncoderTokens`: the positions the keys are for.

    Raises:
        UnitTypeError: ``unit`` is not `Tokens` or `EncoderTokens`, a request's keys are not a
            list or tuple, or a key is not an int.
        UnitValueError: a key is outside int64.

    Example:
        >>> ContentBatch([[7, 8], [9]], Tokens).lengths
        (Tokens(2), Tokens(1))
    """

    __slots__ = ("_arrays", "unit")

    #: Each request's keys as an int64 array (its own: read, never changed).
    _arrays: list[array[int]]
    unit: type[KernelUnit]

    def __init__(self, keys: Sequence[Sequence[int]], unit: type[KernelUnit]) -> None:
        _check_unit(unit)
        per = keys if type(keys) is list or type(keys) is tuple else tuple(keys)
        count = len(per)
        if (
            countOf(map(type, per), list) + countOf(map(type, per), tuple) != count
            or countOf(map(type, chain.from_iterable(per)), int) != sum(map(len, per))
        ):
            _check_batch(per)
        try:
            # Each request's array made from its keys at once (a list's items read in C):
            # one array cut into slices costs more, its items taken from an iterator.
            arrays = list(map(array, repeat("q"), per))
        except OverflowError:
            _check_batch(per)
            raise  # the array's own error, should the check find none
        _set_arrays(self, arrays)
        _set_batch_unit(self, unit)

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError("ContentBatch is immutable: make a new one")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError("ContentBatch is immutable: make a new one")

    def __reduce__(self) -> tuple[Any, ...]:
        return (ContentBatch, (self.keys, self.unit))

    def __len__(self) -> int:
        """The requests it holds content for."""
        return len(self._arrays)

    @property
    def keys(self) -> tuple[tuple[int, ...], ...]:
        """Each request's keys (new tuples each read)."""
        return tuple(map(tuple, self._arrays))

    @property
    def lengths(self) -> tuple[KernelUnit, ...]:
        """The positions each request's keys cover."""
        return tuple(self.unit(len(one)) for one in self._arrays)

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is ContentBatch
            and other.unit is self.unit
            and other._arrays == self._arrays
        )

    def __hash__(self) -> int:
        return hash((self.unit, tuple(one.tobytes() for one in self._arrays)))

    def __repr__(self) -> str:
        keys = sum(map(len, self._arrays))
        return f"ContentBatch({len(self._arrays)} requests, {keys} keys, {self.unit.__name__})"


_set_arrays = ContentBatch.__dict__["_arrays"].__set__
_set_batch_unit = ContentBatch.__dict__["unit"].__set__


def root_hash(unit_name: str, rows_per_block: int, salt: str | None) -> bytes:
    """The parent of a chain's first block: it mixes the granularity (so hashes cut at one
    block size never equal hashes cut at another) and the salt."""
    return hashlib.sha256(
        f"kvunits-prefix/1 {unit_name} {rows_per_block}\x00{salt or ''}".encode()
    ).digest()


def chain_hashes(parent: bytes, keys: Sequence[int], rows_per_block: int) -> list[bytes]:
    """The SHA-256 chain of the full blocks of ``keys`` after ``parent`` (plain ints: rows per
    block in the keys' unit): block i hashes its parent's digest and its keys as
    little-endian int64. A partial last block is not hashed."""
    out = []
    packed = keys if isinstance(keys, array) and keys.typecode == "q" else None
    for start in range(0, len(keys) - rows_per_block + 1, rows_per_block):
        end = start + rows_per_block
        # An int64 array's bytes as they are (a generated sequence's tail and its new keys).
        chunk = (packed[start:end] if packed is not None else array("q", keys[start:end])).tobytes()
        parent = hashlib.sha256(parent + chunk).digest()
        out.append(parent)
    return out


@final
class BlockHashes(Generic[HandleUnit]):
    """The chained hashes of the full cache blocks of a group's content, at that group's
    granularity (made by `kvunits.runtime.GroupHandle.block_hashes`).

    Typed by the unit of the handle it was made for, so that mypy refuses a text group's
    hashes where an audio group's are expected; a group checks the granularity at run time.

    Attributes:
        hashes: one 32-byte digest per full block, chained.
        unit: the unit of the handle the hashes were made for.
        tokens_per_block: positions per cache block, in the content's unit (``block_size × P``
            encoder tokens for a pooled group).
        content: the keys they fingerprint.
    """

    __slots__ = ("_part", "content", "hashes", "tokens_per_block", "unit")

    hashes: tuple[bytes, ...]
    unit: type[HandleUnit]
    tokens_per_block: BlockSize[Any]
    content: ContentKeys[Any]

    def __init__(
        self,
        content: ContentKeys[Any],
        tokens_per_block: BlockSize[Any],
        unit: type[HandleUnit],
    ) -> None:
        if type(content) is not ContentKeys:
            raise UnitTypeError(
                f"block hashes are made from ContentKeys, got {describe(content)}",
                field="content",
                expected="ContentKeys",
                got=describe(content),
            )
        tokens_per_block.check(content.unit, "tokens_per_block")
        self.content = content
        self.tokens_per_block = tokens_per_block
        self.unit = unit
        rows = tokens_per_block.numerical_value_in(content.unit)
        root = root_hash(content.unit.unit, rows, content.salt)
        keys = content._int64s
        self.hashes = hashes = tuple(chain_hashes(root, keys, rows))
        # What the core keeps (plain values, immutable), made with the hashes: an admission
        # reads it, as vLLM's requests carry their block hashes from their creation.
        tail = tuple(keys[len(hashes) * rows :])
        self._part = PrefixPart(hashes, len(keys), tail, hashes[-1] if hashes else root)

    def part(self) -> PrefixPart:
        """What the core keeps of them for a request (plain values)."""
        return self._part

    def __len__(self) -> int:
        return len(self.hashes)

    def __repr__(self) -> str:
        return (
            f"BlockHashes({len(self.hashes)} blocks of {self.tokens_per_block}, for a "
            f"{self.unit.__name__} handle)"
        )


class PrefixPart(NamedTuple):
    """A request's content in one group, as the core keeps it (plain values).

    Attributes:
        hashes: the chained hashes of its full blocks.
        rows: positions of content, in the kernel unit.
        tail: the keys after the last full block (the start of the next one).
        parent: the hash the next full block chains from (the last one, or the root).
    """

    hashes: tuple[bytes, ...]
    rows: int
    tail: tuple[int, ...]
    parent: bytes


@final
@dataclass(frozen=True, slots=True)
class PrefixCacheStats(Generic[KernelUnit]):
    """What one group's prefix cache served (vLLM's ``PrefixCacheStats``), in the group's
    kernel unit.

    Attributes:
        requests: admissions that looked the cache up.
        queried: positions of content they brought.
        hits: positions found in the cache (whole blocks).
    """

    requests: int
    queried: KernelUnit
    hits: KernelUnit

    @property
    def hit_rate(self) -> float:
        """``hits / queried`` (0 when nothing was queried)."""
        queried = magnitude(self.queried)
        return magnitude(self.hits) / queried if queried else 0.0


class GroupCache:
    """One group's prefix cache: its map from block hash to the blocks holding that content,
    and the lookup of its kind (plain ints: blocks of the group, slots, content rows).

    Args:
        spec: the group's manager spec.
        pool: the pool its blocks come from.

    Attributes:
        blocks: hash -> the block holding that content, or the blocks, oldest first, when
            several do (`kvunits.runtime.block_pool.CacheMap`: duplicates happen when
            requests compute one block before any registered it, or a prompt given again
            recomputes its last block; vLLM keeps them too).
        rows_per_block: content positions per cache block (``block_size × P``).
        requests, queried, hits: the statistics (`PrefixCacheStats`), in content rows.
    """

    __slots__ = (
        "block_size",
        "blocks",
        "chunk",
        "hits",
        "kind",
        "pool",
        "queried",
        "requests",
        "rows_per_block",
        "window",
    )

    def __init__(self, spec: ManagerSpec[Any], pool: BlockPool) -> None:
        ints = manager_ints(spec)
        self.kind = spec.kind
        self.block_size = ints.block_size_slots
        self.rows_per_block = ints.block_size_slots * spec.pool.tokens_per_block
        self.window = ints.sliding_window_slots
        self.chunk = ints.chunk_slots
        self.pool = pool
        self.blocks: CacheMap = {}
        pool.add_map(self.blocks)  # its blocks are the pool's (built: not a call's change)
        self.requests = 0
        self.queried = 0
        self.hits = 0

    def find(self, hashes: Sequence[bytes], max_blocks: int, align: int) -> list[int]:
        """The table prefix the longest usable hit gives: cached blocks, and the null block
        where the kind needs nothing (its length is the hit, in cache blocks).

        Args:
            hashes: the request's block hashes at this group's granularity.
            max_blocks: the longest hit allowed, in cache blocks.
            align: the hit is a multiple of this many blocks.
        """
        max_blocks = min(max_blocks, len(hashes))
        get = self.blocks.get
        if self.kind == "full_attention":
            found: list[int] = []
            for i in range(max_blocks):
                held = get(hashes[i])
                if held is None:
                    break
                found.append(held if isinstance(held, int) else held[0])
            del found[len(found) // align * align :]
            return found
        if self.kind == "sliding_window":
            return self._find_window(hashes, max_blocks, align)
        if self.kind == "chunked_local":
            return self._find_chunk(hashes, max_blocks, align)
        return []

    def _find_window(self, hashes: Sequence[bytes], max_blocks: int, align: int) -> list[int]:
        # vLLM's SlidingWindowManager.find_longest_cache_hit: scanning right to left, the first
        # run of cdiv(window - 1, block_size) cached blocks whose right end is aligned wins
        # (the query after the hit reads the window - 1 slots before it); a run reaching
        # block 0 counts even if shorter, since nothing before it is needed.
        assert self.window is not None
        need = cdiv(self.window - 1, self.block_size)
        found = [NULL_BLOCK] * max_blocks
        run = 0
        get = self.blocks.get
        for i in range(max_blocks - 1, -1, -1):
            held = get(hashes[i])
            if held is None:
                run = 0
                continue
            if run == 0 and (i + 1) % align:
                continue  # a run must end on an aligned block
            found[i] = held if isinstance(held, int) else held[0]
            run += 1
            if run >= need:
                del found[i + run :]
                return found
        del found[run:]
        del found[len(found) // align * align :]
        return found

    def _find_chunk(self, hashes: Sequence[bytes], max_blocks: int, align: int) -> list[int]:
        # vLLM's ChunkedLocalAttentionManager.find_longest_cache_hit: the query after the hit
        # reads its own chunk only, so the blocks before that chunk stand as the null block.
        assert self.chunk is not None
        while True:
            start = max_blocks * self.block_size // self.chunk * self.chunk // self.block_size
            found = [NULL_BLOCK] * start
            get = self.blocks.get
            for i in range(start, max_blocks):
                held = get(hashes[i])
                if held is None:
                    break
                found.append(held if isinstance(held, int) else held[0])
            if len(found) % align == 0:
                return found
            # A shorter hit changes the chunk its next query reads: look again from there.
            max_blocks = len(found) // align * align

    def stats(self, unit: type[KernelUnit]) -> PrefixCacheStats[KernelUnit]:
        """The statistics so far, in the group's kernel unit."""
        return PrefixCacheStats(self.requests, unit(self.queried), unit(self.hits))


def longest_common_hit(
    caches: Sequence[GroupCache],
    hashes: Sequence[Sequence[bytes]],
    max_rows: int,
) -> tuple[int, list[list[int]]]:
    """The longest hit every group of one sequence can serve (vLLM's
    ``HybridKVCacheCoordinator.find_longest_cache_hit``): each group in turn lowers the
    candidate to what it can serve, until a whole pass lowers nothing.

    Args:
        caches: the groups that read one sequence.
        hashes: each group's block hashes.
        max_rows: the longest hit allowed, in the sequence's unit.

    Returns:
        The hit in content rows (a multiple of every group's block), and each group's table
        prefix for it.
    """
    align = lcm(*(c.rows_per_block for c in caches))
    hit = max_rows // align * align
    tables: list[list[int]] = [[] for _ in caches]
    while True:
        candidate = hit
        for i, cache in enumerate(caches):
            rows = cache.rows_per_block
            tables[i] = cache.find(hashes[i], candidate // rows, align // rows)
            candidate = min(candidate, len(tables[i]) * rows)
        if candidate >= hit:
            return hit, tables
        hit = candidate
