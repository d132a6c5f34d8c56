"""Service settings, read from ASSAY_* environment variables."""

from __future__ import annotations

import os
from functools import cached_property
from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from sandboxes.factory import SandboxConfig
from sandboxes.warm import WorkerTimings


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="ASSAY_", extra="ignore")

    database_url: str = Field("sqlite:///var/assay.db", description="SQLAlchemy URL of the audit store.")
    sandbox: Literal["process", "docker", "remote"] = "process"
    sandbox_workers: int = Field(default_factory=lambda: os.cpu_count() or 2, ge=1, le=256)
    sandbox_image: str = "assay-runtime:latest"
    # `assay serve`: API processes on the one port (service/serve_processes.py). One process uses
    # about one core (Python's GIL); each of N gets its share of ASSAY_SANDBOX_WORKERS (at least one).
    api_processes: int = Field(1, ge=1, le=64)
    # Names this host on the sandbox containers it makes (leftovers of a crashed run are
    # removed by the next start on the same host); the machine's hostname when unset.
    sandbox_host: str | None = None
    sandbox_acquire_timeout_s: float = Field(30.0, gt=0, description="Wait for a free sandbox worker.")
    sandbox_start_timeout_s: float = Field(60.0, gt=0, description="A worker's start, and a job's hand-over.")
    sandbox_host_grace_s: float = Field(5.0, gt=0, description="Past a job's wall limit: worker stuck.")
    sandbox_container_max_jobs: int = Field(200, ge=1, description="Jobs per sandbox container before it is replaced.")
    # OCI runtime of candidate containers (docker backend, or passed to sandboxd): e.g. runsc
    # for gVisor where the engine has it registered; unset = the engine's default (runc).
    docker_runtime: str | None = None
    # `remote`: the sandbox runner (sandboxd) that holds the Docker socket, as
    # tcp://HOST:PORT or unix:///PATH, and the file with the per-deployment secret both share.
    sandboxd_url: str | None = None
    sandboxd_secret_file: Path | None = None
    # Loudly named on purpose: without namespaces untrusted code runs with the service's rights.
    unsafe_no_isolation: bool = False
    task_pack: Path | None = None
    # Refuse groups on registered tasks whose newest certificate is not `certified` (422 naming the task).
    require_certified_tasks: bool = False
    retention: Literal["full", "hash_only"] = "full"
    max_body_bytes: int = 8 * 1024 * 1024
    max_response_chars: int = 100_000
    max_group_size: int = 64
    max_groups: int = 64
    max_inflight_responses: int = 1024
    # Arrays and objects a JSON body may nest, checked on its bytes before it is parsed.
    max_json_depth: int = Field(64, ge=4, le=500)
    # Tasks one evaluation run may hold (all families together), checked before any work.
    max_eval_tasks: int = Field(1024, ge=1)
    # Samples in one /v1/openrlhf batch.
    max_openrlhf_samples: int = Field(4096, ge=1)
    # Labels one record may carry (each note is at most 4,000 characters).
    max_labels_per_record: int = Field(100, ge=1)
    retry_after_s: int = 2
    # `assay serve`: a request's headers must arrive within this long of the connection opening
    # (or of the previous response), and its body within this long of the headers (slowloris).
    header_timeout_s: float = Field(10.0, gt=0)
    body_timeout_s: float = Field(60.0, gt=0)
    verify_threads: int = 16
    # Verifier families warmed before the service says ready (service/warm_up.py): `all`,
    # `none`, or a comma list. Unwarmed families pay their pools' start in their first request.
    warm_up: str = "all"
    # Admin URL of a Postgres server kept for Postgres-dialect SQL tasks (throwaway schemas
    # and read-only roles are made there). Never the audit database's cluster in production.
    sql_postgres_url: str | None = None
    # Tool-state environment sessions (POST /v1/envs): idle expiry and open-session caps.
    env_ttl_s: float = Field(900.0, gt=0)
    env_max_per_key: int = Field(256, ge=1)
    env_max_sessions: int = Field(4096, ge=1)
    # A finished session keeps its result this long, so a retried finish gets the same answer.
    env_finished_keep_s: float = Field(300.0, gt=0)
    # Sessions keep their state in the database: bound what one may hold.
    env_max_state_chars: int = Field(1_000_000, ge=1)
    # Room kept in the response limit for the final message and the trace's envelope.
    env_finish_room_chars: int = Field(2000, ge=0)
    # Where verification runs: in this process's sandbox, or as Ray tasks on sandbox nodes.
    executor: Literal["local", "ray"] = "local"
    # Passed to ray.init: "auto" (a Ray node on this machine), HOST:PORT, or ray://HOST:PORT.
    ray_address: str = "auto"
    # Ray re-runs a task whose worker or node died this many times.
    ray_max_retries: int = Field(3, ge=0)
    # How long a replica waits for one task before the responses get verdict `error`.
    ray_task_timeout_s: float = Field(600.0, gt=0)
    # Warm sandbox workers in each Ray worker process on the sandbox nodes.
    ray_sandbox_workers: int = Field(2, ge=1, le=64)
    # Audit viewer (/ui/): how long a sign-in lasts, and how many records one export bundle may hold.
    ui_session_hours: float = Field(12.0, gt=0)
    ui_export_max_records: int = Field(20_000, ge=1)
    # Interactive API docs (/docs, /redoc, /openapi.json); compose turns them off.
    api_docs: bool = True
    # Serve /metrics on this port only (a listener of its own, not published in compose)
    # instead of on the API's port; unset = /metrics on the API's port, as before.
    metrics_port: int | None = Field(None, ge=1, le=65535)
    metrics_host: str = "0.0.0.0"
    # The per-deployment secret of keyed fingerprints (service/fingerprints.py): made at first
    # start; by default `fingerprint.key` beside the SQLite database, else var/fingerprint.key.
    fingerprint_key_file: Path | None = None
    # Training runs' alarms (docs/runs.md): where a newly raised alarm is POSTed (unset: nowhere),
    # how often a busy run is re-checked, and how many distinct runs get their own metric label.
    alarm_webhook_url: str | None = None
    alarm_webhook_timeout_s: float = Field(5.0, gt=0)
    alarm_check_interval_s: float = Field(5.0, ge=0)
    alarm_metric_runs: int = Field(100, ge=0)
    # The deployment's Ed25519 key (receipts, signed chain heads): created at first start, mode 0600.
    # Unset: beside the SQLite database (<name>.signing-key.pem), else var/assay.signing-key.pem.
    signing_key_path: Path | None = None
    # Audit chains (docs/security.md): this writer's chain id (the host name when unset; replicas
    # sharing a database need different ones), chains per writer, and how often heads are signed.
    audit_chain_id: str | None = Field(None, max_length=56, pattern=r"^[A-Za-z0-9_.:-]+$")
    audit_chain_lanes: int = Field(8, ge=1, le=64)
    audit_sign_every: int = Field(1024, ge=1)
    audit_sign_interval_s: float = Field(10.0, gt=0)

    def chain_options(self) -> dict[str, object]:
        return {"chain_id": self.audit_chain_id, "lanes": self.audit_chain_lanes,
                "sign_every": self.audit_sign_every, "sign_interval_s": self.audit_sign_interval_s}

    @property
    def verifier_services(self) -> dict[str, str]:
        """External services handed to verifiers in their VerifyContext."""
        return {"sql_postgres": self.sql_postgres_url} if self.sql_postgres_url else {}

    def sandbox_config(self, workers: int | None = None) -> SandboxConfig:
        """The one sandbox configuration: the local executor and every Ray node build from it
        (`workers`: a Ray node's own count, ASSAY_RAY_SANDBOX_WORKERS)."""
        timings = WorkerTimings(start_timeout_s=self.sandbox_start_timeout_s, host_grace_s=self.sandbox_host_grace_s,
                                acquire_timeout_s=self.sandbox_acquire_timeout_s)
        return SandboxConfig(
            backend=self.sandbox, workers=workers or self.sandbox_workers, image=self.sandbox_image,
            unsafe_no_isolation=self.unsafe_no_isolation, timings=timings, host_label=self.sandbox_host,
            container_max_jobs=self.sandbox_container_max_jobs, runtime=self.docker_runtime,
            sandboxd_url=self.sandboxd_url,
            sandboxd_secret_file=None if self.sandboxd_secret_file is None else str(self.sandboxd_secret_file))

    @cached_property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")
