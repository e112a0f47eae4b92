"""``fedmarket reproduce``: every claim of the seed papers this toolkit can test, as one
resumable sweep (:func:`spec`), and docs/reproduction.md written from its store
(:func:`write_reproduction`).

The settings (:data:`SETTINGS`: reduced, digits, full, medium) and the spec live in
:mod:`sims.settings` (re-exported here), below :mod:`sims.claims` and :mod:`sims.costs`.

Every learning claim runs the ``published`` setup (learning.config.PUBLISHED_DIFFERENCES);
Fig. 2 NIID also runs our corrected defaults. Seeds: :func:`sequential_cells` gives each
claim's cells the seeds the sequential rule (:mod:`sims.sequential`) asks for.
"""

from __future__ import annotations

import functools

from .settings import (
    ATTACK_GRID,
    CIFAR_SCENARIOS,
    CLUSTER_CLIENTS,
    FASHION,
    FASHION_OTHER,
    FIG4_ALGORITHMS,
    FULL,
    FULL_CIFAR,
    LAMBDAS,
    MEDIUM,
    MEDIUM_ALGORITHMS,
    PULL_LAM,
    SETTINGS,
    medium_spec,
    spec,
)

__all__ = ["ATTACK_GRID", "CIFAR_SCENARIOS", "CLUSTER_CLIENTS", "FASHION", "FASHION_OTHER",
           "FIG4_ALGORITHMS", "FULL", "FULL_CIFAR", "LAMBDAS", "MEDIUM", "MEDIUM_ALGORITHMS",
           "PULL_LAM", "SETTINGS", "dataset_of", "display_path", "medium_spec",
           "sequential_cells", "spec", "with_device", "with_rules", "write_reproduction"]


def with_rules(cells, *, selection: str | None = None, payments: str | None = None,
               prices: str | None = None) -> list:
    """The cells with iPFL's rules replaced (each a built-in name or "module:function", as
    :func:`mechanisms.ipfl.clear` takes them; None keeps the cell's own): a learning cell of
    iPFL gets them as parameters (``rule``, ``payments``, ``prices``), a market-level cell
    (Table 2, Fig. 5) as its mechanism ("selection+payments+prices"). Cells of other
    algorithms are returned as they are. Every rule is imported and checked here."""
    from dataclasses import replace

    from .scenarios import SCENARIOS, ipfl_mechanism_name, parse_ipfl_mechanism
    from .sweep import Cell

    given = {"rule": selection, "payments": payments, "prices": prices}
    given = {k: v for k, v in given.items() if v is not None}
    if not given:
        return list(cells)
    out = []
    for c in cells:
        sc = SCENARIOS[c.scenario]
        if sc.kind == "learning" and c.mechanism == "ipfl":
            params = tuple(sorted({**dict(c.params), **given}.items()))
            sc.make_config(dict(params), c.seed)  # checks (and imports) every rule
            c = Cell(c.scenario, c.mechanism, params, c.seed)
        elif sc.custom_rules:
            sel, pay, pri = parse_ipfl_mechanism(c.mechanism)
            c = replace(c, mechanism=sc.check_mechanism(ipfl_mechanism_name(
                given.get("rule", sel), given.get("payments", pay), given.get("prices", pri))))
        out.append(c)
    return out


def dataset_of(cell) -> str | None:
    """The data set a learning cell trains on (its ``dataset`` parameter, else its scenario's
    default); None for a mechanism-level cell, which trains nothing.

    >>> from sims.sweep import Cell
    >>> dataset_of(Cell("fig5-learning", "ipfl", (), 3)), dataset_of(Cell("liars", "local", (), 0))
    ('digits', None)
    """
    from .scenarios import SCENARIOS

    sc = SCENARIOS[cell.scenario]
    if sc.kind != "learning":
        return None
    given = dict(cell.params).get("dataset")
    return str(given) if given is not None else _default_dataset(cell.scenario)


@functools.cache
def _default_dataset(scenario: str) -> str:
    from .scenarios import SCENARIOS

    return str(SCENARIOS[scenario].make_config({}, 0).dataset)


def with_device(cells, device: str = "cpu") -> list:
    """The cells with every learning cell's training and evaluation on ``device`` ("cpu",
    "cuda", "cuda:N" or "auto", as ``TrainConfig.device``); "cpu", the default, returns the
    cells as they are (their keys and stored rows unchanged). A device this machine lacks is
    a :class:`~learning.config.TrainInputError` naming ``device``, raised here before any
    cell runs."""
    from learning.config import torch_device

    from .scenarios import SCENARIOS
    from .sweep import Cell

    torch_device(device)  # a device this torch can use, or a clear error
    if device == "cpu":
        return list(cells)
    return [Cell(c.scenario, c.mechanism, tuple(sorted({**dict(c.params),
                                                         "device": device}.items())), c.seed)
            if SCENARIOS[c.scenario].kind == "learning" else c for c in cells]


def sequential_cells(setting: str = "reduced", claims=None, algorithms=()) -> list:
    """The cells the sequential seed rule (:mod:`sims.sequential`) asks for now: every group
    of cells (:func:`sims.claims.group_of`: the cells one claim reads) at the first look's
    seeds, and a group read by a claim still undecided (``claims``, evaluated on the cells
    run so far; :attr:`sims.claims.Claim.next_look`) at the seeds of that claim's next look.
    Seeds are 0, 1, ... in order; the cap is the last look's, but for a confirmation run
    (:func:`sims.sequential.confirm`: fresh seeds after the cap)."""
    from .claims import group_of
    from .sequential import LOOKS
    from .sweep import expand

    need: dict[str, int] = {}
    for c in claims or ():
        if c.next_look is not None:
            for g in c.groups:
                need[g] = max(need.get(g, 0), c.next_look)
    first = LOOKS[0]
    last = max([LOOKS[-1], *need.values()])  # a confirmation run's fresh seeds go past the cap
    return [c for c in expand(spec(setting, tuple(range(last)), algorithms))
            if c.seed < max(first, need.get(group_of(c.scenario, c.mechanism,
                                                     dict(c.params)), first))]


def write_reproduction(store_folder, page, *, setting: str = "reduced", seeds=(0, 1, 2),
                       command: str | None = None, cells=None, expected=None, base=None):
    """Summarise the cells of this setting's spec found in the store into the per-cell
    summary next to the page (:mod:`sims.summary`), then write the page from that summary
    (:func:`sims.claims.write_page`). Without a store (a fresh checkout), the page is written
    from the summary already next to it. ``cells``: the cells to use (default: the spec's at
    ``seeds``); ``expected``: the cells the run asks for (default: ``cells``; the page counts
    those missing as pending, and every cell found counts as asked for); ``base``: a folder
    holding a summary (a committed one) whose cells of ``cells`` the store lacks are taken
    into this one, after every cell in both is found to agree (:func:`sims.summary.merge`)."""
    from pathlib import Path

    from mechanisms.lookup import named_modules, names_from_data

    from .claims import write_page
    from .sweep import expand

    page = Path(page)
    if not (Path(store_folder) / "store.sqlite").is_file():
        return write_page(page.parent, page)
    cells = expand(spec(setting, seeds)) if cells is None else list(cells)
    with names_from_data(f"the store in {store_folder}", named_modules(
            [c.mechanism for c in cells] + [v for c in cells for _, v in c.params])):
        return _write_reproduction(store_folder, page, setting, seeds, command, cells,
                                   expected, base)


def _write_reproduction(store_folder, page, setting, seeds, command, cells, expected, base):
    """:func:`write_reproduction` within its guard: the store is data (a rule it names is
    imported only from a module the run's own cells name)."""
    from . import summary
    from .claims import write_page
    from .sweep import Store

    keys = {c.key for c in cells}
    store = Store(store_folder, mode="r")
    try:
        index = store.cells()
        index = index[index.key.isin(keys)]
        frames = {s: store.frame(s) for s in index.scenario.unique()}
    finally:
        store.close()
    frames = {s: f[f.cell.isin(keys)].reset_index(drop=True) for s, f in frames.items()
              if "cell" in f}
    frames = {s: f for s, f in frames.items() if not f.empty}
    if command is None:
        command = ("fedmarket reproduce" + (f" --setting {setting}" if setting != "reduced"
                                            else "")
                   + f" --seeds {' '.join(map(str, seeds))} --out {display_path(store_folder)} "
                   f"--docs {display_path(page)}")
    made = summary.summarise(frames, index, command=command, setting=setting, seeds=seeds,
                             expected={})
    if base is not None:
        made = summary.merge(made, summary.read(base), keys)
    present = {k for f in made.cells.values() for k in f["cell"]}
    asked = {c.key: c for c in (cells if expected is None else expected)}
    asked.update({c.key: c for c in cells if c.key in present})
    counts: dict = {}
    for c in asked.values():
        counts[c.scenario] = counts.get(c.scenario, 0) + 1
    made.meta["expected"] = dict(sorted(counts.items()))
    made.meta["done"] = {s: int(made.cells[s]["cell"].nunique()) if s in made.cells else 0
                         for s in sorted(counts)}
    summary.write(made, page.parent)
    return write_page(page.parent, page)


def display_path(path) -> str:
    """``path`` relative to the working folder when it lies inside it."""
    from pathlib import Path

    p = Path(path)
    try:
        return str(p.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(p)
