"""The OpenAPI document as the API really behaves: links between operations (so that a
client, or a stateful fuzzer, can follow an id from the response that made it to the
operations that take it)."""

from __future__ import annotations

from typing import Any

# (operation that returns the id, its status, link name, operation that takes it, {parameter: where})
LINKS: list[tuple[tuple[str, str], str, str, tuple[str, str], dict[str, str]]] = [
    (("post", "/v1/tasks"), "201", "GetTask", ("get", "/v1/tasks/{task_id}"),
     {"task_id": "$response.body#/task_id"}),
    (("post", "/v1/envs"), "201", "Step", ("post", "/v1/envs/{env_id}/step"), {"env_id": "$response.body#/env_id"}),
    (("post", "/v1/envs"), "201", "Finish", ("post", "/v1/envs/{env_id}/finish"),
     {"env_id": "$response.body#/env_id"}),
    (("post", "/v1/envs"), "201", "Close", ("delete", "/v1/envs/{env_id}"), {"env_id": "$response.body#/env_id"}),
    (("post", "/v1/verify"), "200", "GetRecord", ("get", "/v1/records/{record_id}"),
     {"record_id": "$response.body#/record_id"}),
    (("post", "/v1/verify"), "200", "ReplayRecord", ("post", "/v1/records/{record_id}/replay"),
     {"record_id": "$response.body#/record_id"}),
    (("post", "/v1/verify"), "200", "GetTaskOfRecord", ("get", "/v1/tasks/{task_id}"),
     {"task_id": "$response.body#/task_id"}),
]


def add_links(document: dict[str, Any]) -> dict[str, Any]:
    """Add LINKS to a generated document (in place; idempotent). Operations a build does
    not have are skipped."""
    paths = document.get("paths", {})
    for (method, path), status, name, (target_method, target_path), parameters in LINKS:
        source = paths.get(path, {}).get(method)
        target = paths.get(target_path, {}).get(target_method)
        if source is None or target is None or status not in source.get("responses", {}):
            continue
        links = source["responses"][status].setdefault("links", {})
        links[name] = {"operationId": target["operationId"], "parameters": parameters}
    return document
