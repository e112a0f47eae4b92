"""Plots. Each takes ``ax=None`` and returns the Axes; none calls ``show()``."""

from __future__ import annotations

import networkx as nx
import numpy as np

__all__ = [
    "ROLE_COLOURS",
    "plot_accuracy",
    "plot_accuracy_by_round",
    "plot_budget_sweep",
    "plot_cpl_participation",
    "plot_cpl_prices",
    "plot_influence",
    "plot_transaction_graph",
    "plot_utility_boxes",
    "pyplot",
    "wrap_label",
]

ROLE_COLOURS = {
    "trader": "#4C72B0",
    "buyer": "#DD8452",
    "seller": "#55A868",
    "attacker": "#C44E52",
}


def pyplot():
    """``matplotlib.pyplot``, with the fonts that matplotlib itself ships registered.

    matplotlib reads its font list from a cache in the user's cache folder, shared by every
    matplotlib of the same cache version on the machine. A list written by a build that
    ships no fonts of its own (Debian's python3-matplotlib uses the system's DejaVu only)
    lacks the STIX and Computer Modern files that this matplotlib's mathtext asks for: each
    figure with a formula then prints about twenty "findfont: ... not found" lines and falls
    back to DejaVu Sans. The fonts under ``matplotlib.get_data_path()/fonts/ttf`` whose family
    the list lacks are added (``FontManager.addfont``, matplotlib's public way to add a font
    file) once per process; nothing is written to the cache and no family the list already
    has is replaced, so figures come out the same whichever build wrote the cache.
    """
    global _FONTS_READY
    import matplotlib.pyplot as plt

    if not _FONTS_READY:
        from pathlib import Path

        import matplotlib
        from matplotlib import font_manager

        fm = font_manager.fontManager
        known = {f.name for f in fm.ttflist}
        folder = Path(matplotlib.get_data_path()) / "fonts" / "ttf"
        for path in sorted(folder.glob("*.ttf")):
            name = font_manager.ttfFontProperty(font_manager.get_font(path)).name
            if name not in known:
                fm.addfont(path)
        _FONTS_READY = True
    return plt


_FONTS_READY = False


def plot_transaction_graph(flows, roles, ax=None, *, title="Cumulative money flows"):
    """Directed graph of cumulative payments: an arrow i -> j of width ~ money i paid j.

    Nodes are placed on a circle grouped by role and coloured by role; an isolated node (the
    attacker, when the market works) has no arrow.
    """
    plt = pyplot()

    flows = np.asarray(flows, dtype=float)
    m = flows.shape[0]
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 7))
    G = nx.DiGraph()
    G.add_nodes_from(range(m))
    i, j = np.nonzero(flows > 0)
    G.add_weighted_edges_from(zip(i.tolist(), j.tolist(), flows[i, j].tolist(), strict=True))
    order = sorted(range(m), key=lambda k: (list(ROLE_COLOURS).index(roles[k]), k))
    pos = nx.circular_layout(nx.path_graph(order))
    colours = [ROLE_COLOURS.get(roles[k], "#999999") for k in range(m)]
    top = flows.max() if flows.size and flows.max() > 0 else 1.0
    widths = [0.5 + 5.0 * d["weight"] / top for _, _, d in G.edges(data=True)]
    nx.draw_networkx_nodes(G, pos, node_color=colours, node_size=700, ax=ax)
    nx.draw_networkx_labels(G, pos, labels={k: str(k) for k in range(m)}, font_color="white",
                            ax=ax)
    nx.draw_networkx_edges(G, pos, width=widths, arrowsize=14, alpha=0.7,
                           connectionstyle="arc3,rad=0.08", node_size=700, ax=ax)
    for role, colour in ROLE_COLOURS.items():
        if role in roles:
            ax.scatter([], [], c=colour, s=80, label=role)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    ax.set_title(title)
    ax.set_axis_off()
    return ax


def wrap_label(name: str, width: int = 24) -> str:
    """A mechanism's name on lines of about ``width`` characters, broken after its "+" and
    ":" separators (``local+myrules:pay+myrules:prices`` is three parts); a part longer than
    ``width`` keeps its own line.

    >>> print(wrap_label("local+mymodule:my_payments+mymodule:my_prices"))
    local+mymodule:
    my_payments+mymodule:
    my_prices
    """
    parts, line = [], ""
    for piece in name.replace("+", "+\0").replace(":", ":\0").split("\0"):
        if line and len(line) + len(piece) > width:
            parts.append(line)
            line = ""
        line += piece
    return "\n".join([*parts, line]) if line else "\n".join(parts)


def plot_utility_boxes(per, ax=None, *, by="mechanism", column="utility"):
    """One horizontal box per ``by`` value (tidy input, one row per client and seed: its
    cumulative ``column``), names wrapped by :func:`wrap_label` on the vertical axis, so that
    long rule names ("module:function" parts) stay readable; a line at zero (below it, the
    client lost by taking part)."""
    plt = pyplot()

    names = sorted(per[by].unique(), key=str)
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 1.2 + 0.45 * len(names)))
    ax.boxplot([per.loc[per[by] == n, column].to_numpy(float) for n in names],
               orientation="horizontal", tick_labels=[wrap_label(str(n)) for n in names])
    ax.invert_yaxis()  # the first name on top
    ax.tick_params(axis="y", labelsize=8)
    ax.axvline(0, color="grey", lw=0.8)
    ax.set_xlabel(f"cumulative {column} per client")
    ax.set_title("Individual rationality (Fig. 3): per-client utility", fontsize=10)
    return ax


def plot_cpl_prices(game, eq, ax=None):
    """Equilibrium price P_n against v_n, with the threshold v^t = 1/(3 lambda*)."""
    plt = pyplot()

    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4))
    colour = np.where(eq.prices < 0, "#C44E52", "#4C72B0")
    clipped = (eq.q <= game.q_min) | (eq.q >= game.q_max)
    ax.scatter(game.v[~clipped], eq.prices[~clipped], s=18, c=colour[~clipped],
               label="interior q_n")
    if clipped.any():  # the threshold theorem speaks of interior clients only
        ax.scatter(game.v[clipped], eq.prices[clipped], s=30, facecolors="none",
                   edgecolors=colour[clipped], label="q_n at q_min or q_max")
    ax.axhline(0.0, color="grey", lw=0.8)
    if eq.v_threshold is not None and np.isfinite(eq.v_threshold):
        ax.axvline(eq.v_threshold, color="#DD8452", ls="--",
                   label=f"v^t = 1/(3 lambda*) = {eq.v_threshold:.4g}")
    ax.legend(frameon=False)
    ax.set_xlabel("intrinsic value v_n")
    ax.set_ylabel("equilibrium price P_n")
    ax.set_title(f"CPL prices ({eq.method})")
    return ax


def plot_cpl_participation(game, eq, ax=None):
    """Participation q_n against a_n G_n (the client's weight in the bound)."""
    plt = pyplot()

    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4))
    ax.scatter(game.a * game.G, eq.q, s=18, c="#55A868")
    ax.set_xscale("log")
    ax.set_xlabel("a_n G_n")
    ax.set_ylabel("participation q_n")
    ax.set_title(f"CPL participation ({eq.method})")
    return ax


def plot_budget_sweep(df, ax=None):
    """Objective bound against budget, one line per pricing scheme (tidy input: ``budget``,
    ``scheme``, ``objective_bound``; with ``low`` and ``high`` columns, the interval over
    seeds as a band around each line)."""
    plt = pyplot()

    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4))
    for name, part in df.groupby("scheme"):
        part = part.sort_values("budget")
        line, = ax.plot(part["budget"], part["objective_bound"], marker="o", ms=3, label=name)
        if {"low", "high"} <= set(part.columns):
            ok = np.isfinite(part["low"].to_numpy(float)) & np.isfinite(
                part["high"].to_numpy(float))
            if ok.any():
                ax.fill_between(part["budget"][ok], part["low"][ok], part["high"][ok],
                                color=line.get_color(), alpha=0.15, lw=0)
    ax.set_yscale("log")
    ax.set_xlabel("budget B")
    ax.set_ylabel("bound sum K (1 - q)/q")
    ax.legend(frameon=False)
    ax.set_title("CPL: bound vs budget")
    return ax


def plot_accuracy(frame, ax=None, *, column="acc_personalised"):
    """Mean (over clients) accuracy per round, one line per algorithm (tidy input)."""
    plt = pyplot()

    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4))
    for name, part in frame.groupby("algorithm"):
        mean = part.groupby("round")[column].mean()
        ax.plot(mean.index, mean.to_numpy(), marker="o", ms=3, label=name)
    ax.set_xlabel("round")
    ax.set_ylabel(f"mean {column.replace('_', ' ')}")
    ax.legend(frameon=False)
    return ax


def plot_accuracy_by_round(frame, ax=None, *, column="acc_personalised", by="mechanism",
                           bounds=(0.0, 1.0)):
    """Mean accuracy per round with a band of the 95 % interval over seeds (tidy input with a
    ``seed`` column: each seed's mean over clients is one sample); the band is clipped to
    ``bounds`` ([0, 1]; None: a quantity without bounds, such as a utility). One line per
    ``by`` value."""
    plt = pyplot()

    from .stats import t_half_width

    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4))
    for name, part in frame.groupby(by):
        per = part.groupby(["round", "seed"])[column].mean().unstack("seed").dropna(how="all")
        mean = per.mean(axis=1)
        n = per.notna().sum(axis=1)
        sd = per.std(axis=1, ddof=1).fillna(0.0)
        half = np.where(n >= 2, t_half_width(sd, np.maximum(n, 2)), 0.0)  # 1 seed: no band
        line, = ax.plot(mean.index, mean.to_numpy(), lw=1.4, label=name)
        lo, hi = (-np.inf, np.inf) if bounds is None else bounds
        ax.fill_between(mean.index, np.clip(mean - half, lo, hi), np.clip(mean + half, lo, hi),
                        color=line.get_color(), alpha=0.15, lw=0)
    ax.set_xlabel("round")
    ax.set_ylabel(f"mean {column.replace('_', ' ')} (band: 95 % CI over seeds)")
    if bounds is not None:
        ax.set_ylim(*bounds)
    ax.legend(frameon=False, fontsize=8, ncol=2)
    return ax


def plot_influence(I, clusters, ax=None):
    """Heat map of the influence matrix I(i, j), clients ordered by cluster."""
    plt = pyplot()

    I = np.asarray(I, dtype=float)
    clusters = np.asarray(clusters)
    order = np.lexsort((np.arange(clusters.size), clusters))
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 5))
    lim = np.abs(I).max() or 1.0
    im = ax.imshow(I[np.ix_(order, order)], cmap="RdBu", vmin=-lim, vmax=lim)
    ax.figure.colorbar(im, ax=ax, label="I(i, j): loss drop on i from j's update")
    ticks = np.arange(clusters.size)
    ax.set_xticks(ticks, [str(k) for k in order], fontsize=6, rotation=90)
    ax.set_yticks(ticks, [str(k) for k in order], fontsize=6)
    bounds = np.flatnonzero(np.diff(clusters[order])) + 0.5
    for b in bounds:
        ax.axhline(b, color="k", lw=0.8)
        ax.axvline(b, color="k", lw=0.8)
    ax.set_xlabel("client j (helper)")
    ax.set_ylabel("client i (helped)")
    ax.set_title("Lazy influence, ordered by LIA cluster")
    return ax
