"""``hqval matrix``: print the loaded matrix (arches with their caps and
gemv_rows_default, devices, formats, shapes, kernels with the arches each applies to);
``--json`` prints it as JSON.  Every file is schema-checked on the way in."""

from __future__ import annotations

import argparse
from typing import Any

from hqval import markdown as md
from hqval import options


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.ARCH.add_to(parser)
    options.MANIFEST.add_to(parser)
    parser.add_argument("--arches-file", metavar="YAML", help="arches.yaml to load instead")
    parser.add_argument("--formats-file", metavar="YAML", help="formats.yaml to load instead")
    parser.add_argument("--shapes-file", metavar="YAML", help="shapes.yaml to load instead")
    options.JSON_PRINT.add_to(parser)


def run(args: argparse.Namespace) -> int:
    from hqval.cli import UsageError
    from hqval.manifest import load_manifest
    from hqval.matrix import matrix_dict, resolve_arches
    from hqval.schema import SchemaError

    try:
        m = matrix_dict(args.arches_file, args.formats_file, args.shapes_file,
                        load_manifest(args.manifest))
        keep = {a.name for a in resolve_arches(args.arch or ["all"], args.arches_file)}
    except SchemaError as exc:
        raise UsageError(f"matrix file invalid: {exc}") from None
    except ValueError as exc:  # unknown --arch, a manifest error
        raise UsageError(str(exc)) from None
    m["arches"] = {n: a for n, a in m["arches"].items() if n in keep}
    for k in m["kernels"]:
        k["arches"] = [a for a in k["arches"] if a in keep]
    if args.json:
        options.write_json(m, args.json)
        if args.json != "-":
            print(f"hqval matrix: wrote {args.json}")
        return 0
    print(render(m))
    return 0


def render(m: dict[str, Any]) -> str:
    out = ["## arches", "", md.table(
        ["arch", "family", "product", "wave", "wmma", "VGPRs/SIMD", "gemv_rows_default", "CUs",
         "boost MHz", "f32 TFLOPS", "L2 MiB", "IC MiB", "GB/s"],
        [[n, a["family"], a["product"], a["wave_size"], a["wmma"], a["vgprs_per_simd"],
          a["gemv_rows_default"], a["cu_count"], a["boost_mhz"],
          f"{a['peak_f32_gflops'] / 1000:.1f}", a["l2_mib"], a["infinity_cache_mib"],
          a["vram_gbps"]] for n, a in m["arches"].items()], align="lllrlrrrrrrrr")]
    if m["devices"]:
        out += ["", "## devices", ""]
        for n, d in m["devices"].items():
            out.append(f"- {n}: {d['vendor']} {d['arch']}, {d['sm_count']} SMs, "
                       f"L2 {d['l2_mib']} MiB, {d['hbm_gbps']} GB/s, {d['memory_gib']} GiB")
    out += ["", "## formats", "", md.table(
        ["format", "qt", "aliases", "B/group", "sub-block", "payload", "rotated", "status"],
        [[n, f["qt"], ", ".join(f["aliases"]), f["group_bytes"], f["sub_block"],
          f"+{f['payload_offset']}", f["rotated"], f["status"]]
         for n, f in m["formats"].items()], align="lrlrrrll")]
    out += ["", "## shapes", ""]
    out += [f"- {s['name']}: {s['M']} x {s['K']} ({s['set']}) {s.get('role', '')}".rstrip()
            for s in m["shapes"]]
    out += ["", f"## kernels ({len(m['kernels'])} from {m['manifest']})", ""]
    for k in m["kernels"]:
        arches = ", ".join(k["arches"]) or "none of the selected arches"
        out.append(f"- {k.get('name')} (qt={k.get('qt')}, {k.get('kind')}): {arches}")
    return "\n".join(out)
