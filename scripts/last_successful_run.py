#!/usr/bin/env python3
"""The id of a workflow's last successful run, whose artifacts are the nightly's baseline.

    python3 scripts/last_successful_run.py nightly.yml

The nightly's merge job runs this, then downloads that run's ``run-*`` artifacts with
actions/download-artifact (``run-id``), so the baseline is the last night that passed
``hqval admit``, kept by GitHub for the artifacts' retention (30 days), not a directory on
one runner's disk.  Standard library only: the lab's merge runner needs python3 and the
GitHub API, nothing else (no ``gh``).

Reads the variables GitHub sets on every runner (``GITHUB_API_URL``, ``GITHUB_REPOSITORY``,
``GITHUB_REF_NAME``, ``GITHUB_RUN_ID``, ``GITHUB_OUTPUT``) and ``GH_TOKEN`` (the job's
token, which needs ``actions: read``).  Writes ``run_id=<id>`` to ``GITHUB_OUTPUT`` when
there is such a run (an empty ``run_id`` when there is none) and says which on one line.
Exit 0 either way; exit 2 when the API cannot be asked (then the night must not pass as
if it had no baseline).
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request


def last_successful_run(api: str, repo: str, workflow: str, branch: str, token: str,
                        exclude: str = "") -> dict[str, object] | None:
    """The newest run of ``workflow`` on ``branch`` that concluded successfully."""
    query = urllib.parse.urlencode({"status": "success", "branch": branch, "per_page": 10})
    url = f"{api}/repos/{repo}/actions/workflows/{workflow}/runs?{query}"
    headers = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers),
                                timeout=60) as resp:
        data = json.load(resp)
    for run in data.get("workflow_runs") or []:
        if str(run.get("id")) != exclude and run.get("conclusion") == "success":
            return dict(run)
    return None


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: last_successful_run.py WORKFLOW_FILE (e.g. nightly.yml)", file=sys.stderr)
        return 2
    env = os.environ
    missing = [k for k in ("GITHUB_REPOSITORY", "GITHUB_OUTPUT") if not env.get(k)]
    if missing:
        print(f"last_successful_run: {', '.join(missing)} not set; run it in a workflow "
              "step", file=sys.stderr)
        return 2
    api = env.get("GITHUB_API_URL", "https://api.github.com")
    try:
        run = last_successful_run(api, env["GITHUB_REPOSITORY"], argv[1],
                                  env.get("GITHUB_REF_NAME", "main"), env.get("GH_TOKEN", ""),
                                  exclude=env.get("GITHUB_RUN_ID", ""))
    except (OSError, urllib.error.URLError, ValueError) as exc:
        print(f"last_successful_run: cannot ask {api} for {argv[1]}'s runs ({exc}); the "
              "night cannot find its baseline", file=sys.stderr)
        return 2
    with open(env["GITHUB_OUTPUT"], "a", encoding="utf-8") as out:
        out.write(f"run_id={run['id'] if run else ''}\n")
    if run is None:
        print(f"no successful run of {argv[1]} on {env.get('GITHUB_REF_NAME', 'main')}: "
              "no baseline")
    else:
        print(f"baseline: run {run['id']} ({run.get('created_at', '?')}, "
              f"{run.get('html_url', '')})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
