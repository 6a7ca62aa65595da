"""`trex plan`: choose a parallel layout for a DeepSeek-V4 model on a cluster and explain it;
`trex plan mfu`: the MFU of a measured step under both FLOP conventions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from trex_cli.console import out, user_errors

app = typer.Typer(
    help="Plan SuperPOD layouts: ranked layouts with memory, step time and MFU; check one layout; MFU calculator.",
    add_completion=False,
)

RecipeOption = Annotated[Path | None, typer.Option("--recipe", help="Recipe TOML; its \\[plan] and \\[model] tables give the defaults.")]
SetOption = Annotated[list[str] | None, typer.Option("--set", help="Override a recipe key, e.g. --set plan.ranks=512 (repeatable).")]
FlavorOption = Annotated[str | None, typer.Option("--flavor", help="Model flavor: tiny, small, flash, pro.")]
ConfigOption = Annotated[Path | None, typer.Option("--config", help="A model's config.json (or its folder) instead of a flavor.")]
RanksOption = Annotated[int | None, typer.Option("--ranks", help="World size (ranks = dies on Ascend 910C, GPUs elsewhere).")]
SeqOption = Annotated[int | None, typer.Option("--seq", help="Sequence length in tokens.")]
BatchOption = Annotated[int | None, typer.Option("--global-batch", help="Sequences per optimizer step.")]
ClusterOption = Annotated[str | None, typer.Option("--cluster", help="Profile: cloudmatrix384 (910c), h100, h200, cpu, or a TOML/JSON profile file.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON instead of tables.")]


def _model_and_plan(recipe_path, overrides, flavor, config_path):
    from trex_cli.plan.parameters import load_model_shape
    from trex_cli.recipe import load_recipe

    recipe = load_recipe(recipe_path, overrides)
    plan = recipe.section("plan")
    if flavor or config_path:
        shape, config = load_model_shape(flavor, config_path)
    else:
        model = recipe.section("model")
        config = model.build_config()
        from trex_cli.plan.parameters import ModelShape

        shape = ModelShape.from_config(config)
    return recipe, plan, shape, config


def _parse_check(text: str) -> tuple[int, ...]:
    parts = [p.strip() for p in text.split(",")]
    if len(parts) != 6 or not all(p.isdigit() for p in parts):
        raise ValueError(f"--check {text!r}: expected six integers TP,PP,VPP,EP,ETP,CP (VPP = layers per virtual "
                         "stage, 0 for none), e.g. --check 2,8,4,64,1,1")
    return tuple(int(p) for p in parts)


def _fragment(evaluation, job, plan, cluster_name: str) -> str:
    """The chosen layout as a recipe fragment: [plan], the layout keys of [mindspeed] and the
    [train.parallel] table the native engine runs as is."""
    from trex_cli.recipe import dumps_toml

    layout = evaluation.layout
    slots = job.shape.num_layers + len(layout.noop_layers)
    virtual = slots // (layout.pp * layout.vpp_layers) if layout.vpp_layers else 1
    parallel = {"tp": layout.tp, "pp": layout.pp, "ep": layout.ep, "etp": layout.etp, "cp": layout.cp,
                "dp_replicate": 1, "dp_shard": -1, "pp_schedule": "Interleaved1F1B" if virtual > 1 else "1F1B",
                "pp_virtual_stages": virtual, "noop_layer_slots": list(layout.noop_layers),
                # the planner's activation memory splits token-sized activations over tp with it
                "sequence_parallel": layout.sequence_parallel and layout.tp > 1,
                # the native engine's swap moves AdamW's moments to the host (the fp32_master precision's 8
                # optimizer bytes per element), as the planner's swap does
                "swap_optimizer": layout.optimizer_swap}
    if layout.recompute in ("none", "full"):
        # the planner's "selective" (activation functions, indexer scores) is not the engine's every-n-th
        # block, so that one is left to the recipe
        parallel["activation_checkpoint"] = layout.recompute
    tables = {
        "plan": {"cluster": cluster_name, "ranks": job.world, "seq_len": job.seq_len,
                 "global_batch": job.global_batch,
                 "check": f"{layout.tp},{layout.pp},{layout.vpp_layers},{layout.ep},{layout.etp},{layout.cp}",
                 "recompute": layout.recompute, "optimizer_swap": layout.optimizer_swap,
                 "micro_batch": layout.micro_batch, "noop_layers": list(layout.noop_layers)},
        "mindspeed": {"tp": layout.tp, "pp": layout.pp, "vpp_layers": layout.vpp_layers, "ep": layout.ep,
                      "etp": layout.etp, "cp": layout.cp, "noop_layers": list(layout.noop_layers),
                      "micro_batch": layout.micro_batch, "global_batch": job.global_batch, "seq_len": job.seq_len,
                      "recompute": layout.recompute, "swap_optimizer": layout.optimizer_swap,
                      "sequence_parallel": layout.sequence_parallel and layout.tp > 1,
                      "distributed_optimizer": layout.distributed_optimizer},
        "train": {"parallel": parallel},
    }
    estimate = (f"# estimated: step {evaluation.time.step:.2f} s, MFU {100 * evaluation.mfu:.2f}%, "
                f"peak memory {evaluation.memory.total / 1e9:.1f} GB per rank\n")
    return f"# written by `trex plan` ({layout.describe()})\n" + estimate + dumps_toml(tables)


def _gb(value: float) -> str:
    return f"{value / 1e9:.1f}"


def _print_evaluation(evaluation, cluster) -> None:
    from rich.table import Table

    layout = evaluation.layout
    status = "[green]feasible[/green]" if evaluation.feasible else "[red]rejected[/red]"
    out.print(f"{layout.describe()}: {status}")
    for reason in evaluation.reasons:
        out.print(f"  - {reason}", highlight=False)
    if evaluation.memory is None:
        return
    memory, time = evaluation.memory, evaluation.time
    table = Table(title=f"per-rank memory (GB), heaviest stage {memory.stage}")
    for column in ("weights", "grads", "optimizer", "activations", "recompute", "logits", "comm buffers", "total",
                   "usable"):
        table.add_column(column, justify="right")
    table.add_row(_gb(memory.weights), _gb(memory.gradients), _gb(memory.optimizer), _gb(memory.activations),
                  _gb(memory.recompute_workspace), _gb(memory.logits), _gb(memory.communication_buffers),
                  _gb(memory.total), _gb(cluster.usable_memory_bytes))
    out.print(table)
    if memory.host_optimizer_per_node:
        out.print(f"host memory for swapped optimizer states: {_gb(memory.host_optimizer_per_node)} GB per node "
                  f"(of {cluster.host_memory_gb:g})")
    table = Table(title=f"step time (s), {time.microbatches} micro-batches per step")
    for column in ("step", "compute", "bubble", "TP comm", "CP comm", "EP all-to-all", "PP send/recv", "DP comm",
                   "optimizer", "exposed comm", "MFU %", "HFU %"):
        table.add_column(column, justify="right")
    table.add_row(*(f"{v:.2f}" for v in (time.step, time.compute, time.bubble, time.tensor_parallel,
                                         time.context_parallel, time.expert_all_to_all, time.pipeline_p2p, time.data_parallel,
                                         time.optimizer, time.exposed_communication, 100 * evaluation.mfu,
                                         100 * evaluation.hfu)))
    out.print(table)


@app.callback(invoke_without_command=True)
@user_errors
def plan(
    ctx: typer.Context,
    recipe: RecipeOption = None,
    overrides: SetOption = None,
    flavor: FlavorOption = None,
    config: ConfigOption = None,
    ranks: RanksOption = None,
    seq: SeqOption = None,
    global_batch: BatchOption = None,
    cluster: ClusterOption = None,
    check: Annotated[str | None, typer.Option("--check", help="Evaluate one layout: TP,PP,VPP,EP,ETP,CP (VPP = layers per virtual stage, 0 = none).")] = None,
    micro_batch: Annotated[int | None, typer.Option("--micro-batch", help="Micro-batch size for --check.")] = None,
    recompute: Annotated[str | None, typer.Option("--recompute", help="full, selective or none, for --check.")] = None,
    swap: Annotated[bool | None, typer.Option("--swap/--no-swap", help="Optimizer state swap to host, for --check.")] = None,
    noop_layers: Annotated[str | None, typer.Option("--noop-layers", help="Comma-separated no-op layer slots for --check (default: automatic).")] = None,
    top: Annotated[int | None, typer.Option("--top", help="Rows of the ranked table.")] = None,
    measured_step_time: Annotated[float | None, typer.Option("--measured-step-time", help="With --check: a measured step time (s); prints the compute efficiency that reproduces it, for a profile file.")] = None,
    force_search: Annotated[bool, typer.Option("--search", help="Search layouts even when the recipe's \\[plan] names one to check.")] = False,
    out_path: Annotated[Path | None, typer.Option("--out", help="Write the best (or checked) layout as a recipe fragment (TOML).")] = None,
    validate_model: Annotated[bool, typer.Option("--validate", help="Fit the step-time model to T-Rex's Pro step and print its error on published runs it was not fitted to.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Rank parallel layouts by estimated step time, with per-rank memory, MFU and why rejected
    layouts failed; or evaluate one layout with --check (exit status 2 when it does not fit)."""
    if ctx.invoked_subcommand is not None:
        return
    if validate_model:
        _print_validation(as_json)
        return
    import dataclasses

    from trex_cli.artifacts import write_text_atomic
    from trex_cli.plan.clusters import load_cluster
    from trex_cli.plan.layout import Job, PlannedLayout, default_noop_layers
    from trex_cli.plan.memory import Precision
    from trex_cli.plan.mfu import flops_per_token
    from trex_cli.plan.search import evaluate, search

    recipe_obj, section, shape, model_config = _model_and_plan(recipe, overrides, flavor, config)
    ranks = ranks or section.ranks
    seq = seq or section.seq_len
    global_batch = global_batch or section.global_batch
    if not ranks:
        raise ValueError("give the world size: --ranks N (or [plan] ranks in the recipe)")
    if not global_batch:
        raise ValueError("give the global batch: --global-batch N (or [plan] global_batch in the recipe)")
    cluster_profile = load_cluster(cluster or section.cluster)
    job = Job(shape=shape, world=ranks, seq_len=seq, global_batch=global_batch)
    precision = Precision.named(section.precision)
    model_flops = flops_per_token(model_config, seq, "v4")
    from_recipe = not check and not force_search and bool(section.check)
    check = check or ("" if force_search else section.check)
    if check:
        tp, pp, vpp, ep, etp, cp = _parse_check(check)
        # the recipe's no-op layers belong to the recipe's layout, not to one given on the command line
        recipe_noop = tuple(section.noop_layers) if from_recipe else ()
        noop = tuple(int(x) for x in noop_layers.split(",") if x.strip()) if noop_layers else \
            recipe_noop or default_noop_layers(shape.num_layers, pp, vpp)
        recompute_mode = recompute or section.recompute
        if recompute_mode not in ("full", "selective", "none"):
            raise ValueError(f"--recompute {recompute_mode!r}: use full, selective or none")
        layout = PlannedLayout(tp=tp, pp=pp, vpp_layers=vpp, ep=ep, etp=etp, cp=cp,
                        micro_batch=micro_batch or section.micro_batch, recompute=recompute_mode,
                        optimizer_swap=section.optimizer_swap if swap is None else swap, noop_layers=noop)
        evaluation = evaluate(job, layout, cluster_profile, model_flops, precision)
        if evaluation.memory is None:  # broke a divisibility rule: a user error, said in one line
            raise ValueError(f"layout {layout.describe()} on {ranks} ranks is invalid: " + "; ".join(evaluation.reasons))
        if as_json:
            out.print_json(json.dumps({"cluster": dataclasses.asdict(cluster_profile), "world": ranks, "seq_len": seq,
                                       "global_batch": global_batch, "evaluation": evaluation.as_dict()}))
        else:
            out.print(f"[bold]{cluster_profile.description}[/bold], {ranks} ranks, sequence {seq}, "
                      f"global batch {global_batch}")
            _print_evaluation(evaluation, cluster_profile)
        if measured_step_time:
            from trex_cli.plan.timing import calibrate_efficiency

            efficiency = calibrate_efficiency(job, layout, cluster_profile, model_flops, measured_step_time)
            out.print(f"compute_efficiency = {efficiency:.4f} reproduces the measured {measured_step_time:g} s step "
                      f"(profile default {cluster_profile.compute_efficiency:g}); put it in a profile file to use it")
        if out_path and evaluation.feasible:
            write_text_atomic(out_path, _fragment(evaluation, job, section, cluster or section.cluster))
            if not as_json:
                out.print(f"wrote {out_path}")
        if not evaluation.feasible:
            raise typer.Exit(code=2)
        return

    micro_batches = (micro_batch,) if micro_batch else tuple(section.micro_batches)
    result = search(job, cluster_profile, model_flops, precision, micro_batches=micro_batches)
    rows = top or section.top
    if as_json:
        out.print_json(json.dumps({
            "cluster": dataclasses.asdict(cluster_profile), "world": ranks, "seq_len": seq,
            "global_batch": global_batch, "flops_per_token": model_flops, "examined": result.examined,
            "feasible": [e.as_dict() for e in result.feasible[:rows]],
            "feasible_count": len(result.feasible),
            "rejected_count": len(result.rejected),
            "rejections": [{"reason": kind, "count": count, "example": example}
                           for kind, count, example in result.rejection_summary()],
        }))
    else:
        _print_ranked(result, rows, cluster_profile, job)
    if not result.feasible:
        raise ValueError(f"no layout of {ranks} ranks fits {shape.num_layers}-layer model at sequence {seq}: "
                         "add ranks, shorten the sequence or use a profile with more memory")
    if out_path:
        write_text_atomic(out_path, _fragment(result.feasible[0], job, section, cluster or section.cluster))
        if not as_json:
            out.print(f"wrote the best layout to {out_path}")


def _print_validation(as_json: bool) -> None:
    from rich.table import Table

    from trex_cli.plan.validation import validate_against_published

    report = validate_against_published()
    if as_json:
        out.print_json(json.dumps(report))
        return
    out.print(f"compute_efficiency {report['compute_efficiency']:.4f} on {report['cluster']}, fitted to "
              f"{report['fitted_to']}'s step; the other runs are predictions", highlight=False)
    table = Table(title="step-time model against published runs")
    for column in ("run", "role", "layout", "ranks", "GBS", "published", "measured step s", "predicted step s",
                   "predicted tokens/s/device", "error %"):
        table.add_column(column, justify="right" if column not in ("run", "layout", "published") else "left")
    for row in report["runs"]:
        table.add_row(row["name"], row["role"], row["layout"], str(row["world"]), str(row["global_batch"]),
                      row["measured"], f"{row['measured_step_s']:.2f}", f"{row['predicted_step_s']:.2f}",
                      f"{row['predicted_tokens_per_s_per_device']:,.0f}", f"{100 * row['error']:+.1f}")
    out.print(table)
    for row in report["runs"]:
        out.print(f"  {row['name']}: {row['assumptions']} ({row['source']})", highlight=False)
    table = Table(title="which FLOP count gives T-Rex's 34.22% at about 27 s (Pro, 512 ranks, GBS 1024)")
    for column in ("FLOP convention", "GFLOP/token", "MFU % at 27 s", "step s for 34.22%"):
        table.add_column(column, justify="left" if column == "FLOP convention" else "right")
    for row in report["mfu_conventions"]:
        name = row["convention"] + ("  <- closest" if row["closest"] else "")
        table.add_row(name, f"{row['gflop_per_token']:.1f}", f"{100 * row['mfu_at_27s']:.2f}",
                      f"{row['step_for_34_22']:.2f}")
    out.print(table)


def _print_ranked(result, rows: int, cluster, job) -> None:
    from rich.table import Table

    out.print(f"[bold]{cluster.description}[/bold]: {job.world} ranks, sequence {job.seq_len}, global batch "
              f"{job.global_batch}; {result.examined} layouts examined, {len(result.feasible)} fit, "
              f"{len(result.rejected)} rejected; only layouts trex's {cluster.engine} engine runs")
    out.print("MFU: Megatron model FLOPs with V4 attention; HFU adds the recomputed forward (T-Rex's count)",
              highlight=False)
    if not result.feasible:
        out.print("no layout fits")
    out.print(layout_table(result.feasible[:rows], job.world, out.width))
    summary = result.rejection_summary()
    if summary:
        table = Table(title="why the other layouts were rejected")
        table.add_column("reason")
        table.add_column("layouts", justify="right")
        table.add_column("example")
        for kind, count, example in summary:
            table.add_row(kind, str(count), example)
        out.print(table)


def layout_table(evaluations, world: int, width: int):
    """The ranked layouts as a table that fits the terminal: one column per knob where it is wide, the
    layout written as one word (TP4 PP4 VPP2 EP32 ETP4 CP1 mb1) and the key figures at 80 columns."""
    from rich.table import Table

    wide = width >= 150
    table = Table(title="best layouts (estimated)")
    columns = (("#", "TP", "PP", "VPP", "EP", "ETP", "CP", "DP", "mb", "recompute", "swap", "no-op layers",
                "mem GB", "step s", "bubble s", "exposed comm s", "MFU %", "HFU %") if wide else
               ("#", "layout", "recompute", "mem GB", "step s", "MFU %", "HFU %"))
    for column in columns:
        table.add_column(column, justify="left" if column in ("layout", "recompute") else "right",
                         no_wrap=column != "layout")
    for index, evaluation in enumerate(evaluations, 1):
        layout, memory, time = evaluation.layout, evaluation.memory, evaluation.time
        dp = world // (layout.tp * layout.pp * layout.cp)
        figures = [_gb(memory.total), f"{time.step:.2f}"]
        if wide:
            table.add_row(str(index), str(layout.tp), str(layout.pp), str(layout.vpp_layers or "-"), str(layout.ep),
                          str(layout.etp), str(layout.cp), str(dp), str(layout.micro_batch), layout.recompute,
                          "yes" if layout.optimizer_swap else "no", ",".join(map(str, layout.noop_layers)) or "-",
                          *figures, f"{time.bubble:.2f}", f"{time.exposed_communication:.2f}",
                          f"{100 * evaluation.mfu:.2f}", f"{100 * evaluation.hfu:.2f}")
            continue
        words = [f"TP{layout.tp}", f"PP{layout.pp}"] + ([f"VPP{layout.vpp_layers}"] if layout.vpp_layers else [])
        words += [f"EP{layout.ep}", f"ETP{layout.etp}", f"CP{layout.cp}", f"DP{dp}", f"mb{layout.micro_batch}"]
        words += ["swap"] if layout.optimizer_swap else []
        words += [f"no-op {','.join(map(str, layout.noop_layers))}"] if layout.noop_layers else []
        table.add_row(str(index), " ".join(words), layout.recompute, *figures, f"{100 * evaluation.mfu:.1f}",
                      f"{100 * evaluation.hfu:.1f}")
    return table


@app.command("mfu")
@user_errors
def mfu_command(
    recipe: RecipeOption = None,
    overrides: SetOption = None,
    flavor: FlavorOption = None,
    config: ConfigOption = None,
    ranks: RanksOption = None,
    step_time: Annotated[float | None, typer.Option("--step-time", help="Measured seconds per optimizer step.")] = None,
    seq: SeqOption = None,
    global_batch: BatchOption = None,
    cluster: ClusterOption = None,
    as_json: JsonOption = False,
) -> None:
    """MFU of a measured step under both FLOP conventions (V4-aware and dense attention), naming the peak."""
    from rich.table import Table

    from trex_cli.plan.clusters import load_cluster
    from trex_cli.plan.mfu import compute_mfu

    _, section, shape, model_config = _model_and_plan(recipe, overrides, flavor, config)
    ranks = ranks or section.ranks
    global_batch = global_batch or section.global_batch
    if not ranks or not global_batch or not step_time:
        raise ValueError("give --ranks, --global-batch and --step-time (e.g. --ranks 512 --step-time 27 "
                         "--seq 4096 --global-batch 256)")
    profile = load_cluster(cluster or section.cluster)
    report = compute_mfu(model_config, ranks, step_time, seq or section.seq_len, global_batch, profile)
    if as_json:
        out.print_json(json.dumps(report.as_dict()))
        return
    out.print(f"{report.tokens_per_step:,} tokens per step, {report.tokens_per_second:,.0f} tokens/s on "
              f"{ranks} ranks")
    out.print(f"peak: {report.peak_name}")
    table = Table(title="MFU")
    table.add_column("FLOP convention")
    table.add_column("GFLOP per token", justify="right")
    table.add_column("MFU %", justify="right")
    names = {"v4": "Megatron, V4 sparse attention", "dense": "Megatron, dense causal attention"}
    for convention, value in report.mfu.items():
        table.add_row(names[convention], f"{report.flops_per_token[convention] / 1e9:.1f}", f"{100 * value:.2f}")
    table.add_row("V4 sparse + recomputed forward (full recompute; T-Rex's count)",
                  f"{report.flops_per_token['v4'] * 4 / 3 / 1e9:.1f}", f"{100 * report.hfu_full_recompute:.2f}")
    out.print(table)
