"""The check's replay of recorded paths (reload_lint/watch/_replay.py) against a full walk."""

from __future__ import annotations

import dataclasses
import functools
import gc
import random

import pytest

torch = pytest.importorskip("torch")

from reload_lint.watch import StorageWatch  # noqa: E402


class Kernel:
    def __init__(self):
        self.workspace = torch.zeros(4)
        self.perm = functools.partial(torch.index_select, dim=0, index=torch.arange(4))
        self.scales = {"in": torch.ones(1), 3: torch.ones(1)}
        self.parts = [torch.ones(1), (torch.ones(1),)]


class Slotted:
    __slots__ = ("buf",)

    def __init__(self):
        self.buf = torch.ones(2)


def closure(t):
    def f():
        return t

    return f


class Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(4, 4), requires_grad=False)
        self.register_buffer("scale", torch.ones(4))
        self.kernel = Kernel()
        self.slotted = Slotted()
        self.fn = closure(torch.ones(3))
        self.packed = torch.zeros(3)


def model(n=3):
    return torch.nn.ModuleList([Layer() for _ in range(n)])


# each mutation is what some post-load code does; none shares an object between two paths
MUTATIONS = [
    lambda m, i: setattr(m[i], "packed", m[i].packed.clone()),
    lambda m, i: setattr(m[i].kernel, "workspace", torch.zeros(4)),
    lambda m, i: setattr(m[i], "kernel", Kernel()),  # the kernel object rebuilt
    lambda m, i: m[i].kernel.scales.__setitem__("in", torch.ones(1)),
    lambda m, i: m[i].kernel.scales.__setitem__(3, torch.ones(1)),
    lambda m, i: m[i].kernel.scales.pop("in"),
    lambda m, i: m[i].kernel.parts.__setitem__(1, (torch.ones(1),)),
    lambda m, i: m[i].kernel.parts.pop(),
    lambda m, i: setattr(
        m[i].kernel, "perm", functools.partial(torch.index_select, dim=0, index=torch.arange(4))
    ),
    lambda m, i: setattr(m[i].slotted, "buf", torch.ones(2)),
    lambda m, i: setattr(m[i], "fn", closure(torch.ones(3))),
    lambda m, i: delattr(m[i], "packed"),
    lambda m, i: m[i].weight.data.copy_(torch.randn(4, 4)),  # in place: nothing moves
    lambda m, i: m[i].scale.copy_(torch.randn(4)),
    lambda m, i: setattr(m[i].weight, "data", torch.randn(4, 4)),  # same Parameter, new storage
    lambda m, i: m[i].register_parameter(  # a new Parameter under the same name
        "weight", torch.nn.Parameter(torch.ones(4, 4), requires_grad=False)
    ),
    lambda m, i: (
        m[i]._parameters.pop("weight"),
        setattr(m[i], "weight", torch.ones(4, 4)),  # a parameter turned plain attribute
    ),
    lambda m, i: m[i].kernel.workspace.untyped_storage().resize_(64),  # same storage, new address
]


def reference(watch: StorageWatch) -> tuple[set[str], set[str]]:
    """moved/freed through a full walk, the check's behaviour before the replay."""
    now = watch._pointers()
    moved = {p for p, s in watch.slots.items() if now.get(p) is not None and now[p] != s.data_ptr}
    freed = {p for p, s in watch.slots.items() if s.ref.expired()}
    return moved, freed


@pytest.mark.parametrize("seed", range(25))
def test_replay_agrees_with_a_full_walk_after_random_post_load_edits(seed):
    rnd = random.Random(seed)
    m = model()
    watch = StorageWatch.collect(m)
    for _ in range(rnd.randint(1, 6)):
        try:
            rnd.choice(MUTATIONS)(m, rnd.randrange(len(m)))
        except (AttributeError, IndexError, KeyError):  # the attribute is already gone
            pass
    gc.collect()
    moved, freed = reference(watch)
    report = watch.check()
    assert {c.path for c in report.moved} == moved
    assert {c.path for c in report.freed} == freed


def test_each_mutation_alone_agrees_with_the_full_walk():
    for k, mutate in enumerate(MUTATIONS):
        m = model(1)
        watch = StorageWatch.collect(m)
        mutate(m, 0)
        gc.collect()
        moved, freed = reference(watch)
        report = watch.check()
        assert ({c.path for c in report.moved}, {c.path for c in report.freed}) == (
            moved,
            freed,
        ), k


def test_a_set_member_falls_back_to_the_walk_and_is_still_checked():
    m = model(1)
    m[0].kernel.pool = {torch.ones(2)}
    watch = StorageWatch.collect(m)
    assert watch._plan.unreplayable  # a set has no stable order to replay
    m[0].kernel.pool = {torch.ones(2)}
    gc.collect()
    report = watch.check()
    assert "0.kernel.pool[#0]" in {c.path for c in report.moved}


def test_a_dict_keyed_by_a_tensor_is_not_held_by_the_watch():
    m = model(1)
    key = torch.ones(2)
    m[0].kernel.by_key = {key: torch.ones(1)}
    watch = StorageWatch.collect(m)
    ref = key.untyped_storage()
    from torch.multiprocessing.reductions import StorageWeakRef

    weak = StorageWeakRef(ref)
    del ref, key
    m[0].kernel.by_key = {}
    gc.collect()
    assert weak.expired()  # the recorded step kept no key alive
    assert watch.check()  # the entry's storage went with it: reported freed


def test_no_change_is_empty_and_costs_no_walk(monkeypatch):
    m = model()
    watch = StorageWatch.collect(m)
    monkeypatch.setattr(watch, "_pointers", lambda: pytest.fail("walked"))
    assert not watch.check()


def test_recorded_path_is_taken_even_where_a_walk_would_name_the_object_elsewhere():
    m = model(2)
    watch = StorageWatch.collect(m)
    # the rebuilt kernel is now shared: a walk would name its tensors under layer 0 only
    shared = Kernel()
    m[0].kernel = shared
    m[1].kernel = shared
    report = watch.check()
    moved = {c.path for c in report.moved}
    assert "1.kernel.workspace" in moved and "0.kernel.workspace" in moved


def test_below_a_set_only_the_set_is_walked(monkeypatch):
    m = model(3)
    m[1].kernel.pool = {torch.ones(2)}
    watch = StorageWatch.collect(m)
    assert len(watch._plan.unreplayable) == 1
    monkeypatch.setattr(watch, "_pointers", lambda: pytest.fail("walked the whole model"))
    assert not watch.check()  # nothing changed: the set's member is found again below it
    (old,) = m[1].kernel.pool
    m[1].kernel.pool.discard(old)
    m[1].kernel.pool.add(torch.ones(2))  # the same set, a new member
    assert "1.kernel.pool[#0]" in {c.path for c in watch.check().moved}


def test_a_tensor_keyed_entry_is_found_again_below_its_dict(monkeypatch):
    m = model(2)
    key = torch.ones(2)
    m[0].kernel.by_key = {key: torch.ones(1)}
    watch = StorageWatch.collect(m)
    assert watch._plan.unreplayable
    monkeypatch.setattr(watch, "_pointers", lambda: pytest.fail("walked the whole model"))
    m[0].kernel.by_key[key] = torch.ones(1)
    moved = {c.path for c in watch.check().moved}
    assert any(p.startswith("0.kernel.by_key[tensor(") for p in moved), moved


def test_a_path_the_walk_below_does_not_name_again_falls_back_to_the_full_walk(monkeypatch):
    m = model(1)
    m[0].kernel.pool = {torch.ones(2), torch.ones(3)}
    watch = StorageWatch.collect(m)
    for t in list(m[0].kernel.pool):
        m[0].kernel.pool.discard(t)
        break  # one member left: one recorded `[#i]` is not named again below the set
    calls = []
    full = watch._pointers
    monkeypatch.setattr(watch, "_pointers", lambda: calls.append(1) or full())
    watch.check()
    assert calls == [1]


@dataclasses.dataclass(frozen=True)
class Batch:  # the shape of vLLM's BatchDescriptor, the key of each captured graph's entry
    num_tokens: int
    num_reqs: int | None = None
    uniform: bool = False


@dataclasses.dataclass(frozen=True)
class HoldsTensor:
    t: object = None


def test_plain_dict_keys_replay_without_a_walk():
    m = model(1)
    m[0].kernel.graphs = {Batch(8): torch.ones(1), Batch(16, 4, True): torch.ones(1)}
    m[0].kernel.by_dtype = {torch.float16: torch.ones(1), (torch.float32, "cuda", 2): torch.ones(1)}
    m[0].kernel.by_class = {Kernel: torch.ones(1), torch.Size([2, 2]): torch.ones(1)}
    watch = StorageWatch.collect(m)
    assert not watch._plan.unreplayable
    m[0].kernel.by_dtype[torch.float16] = torch.ones(1)
    m[0].kernel.by_class[Kernel] = torch.ones(1)
    moved = {c.path for c in watch.check().moved}
    assert "0.kernel.by_dtype[torch.float16]" in moved
    assert sum("by_class[" in p for p in moved) == 1, moved
    m[0].kernel.graphs[Batch(8)] = torch.ones(1)
    assert sum("graphs[" in c.path for c in watch.check().moved) == 1


def test_a_frozen_dataclass_key_holding_a_tensor_is_not_held():
    m = model(1)
    m[0].kernel.by_obj = {HoldsTensor(torch.ones(2)): torch.ones(1)}
    watch = StorageWatch.collect(m)
    assert watch._plan.unreplayable  # holding that key would keep its tensor alive
