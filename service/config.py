"""Service settings, read from ASSAY_* environment variables."""

from __future__ import annotations

import os
from functools import cached_property
from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="ASSAY_", extra="ignore")

    database_url: str = Field("sqlite:///var/assay.db", description="SQLAlchemy URL of the audit store.")
    sandbox: Literal["process", "docker"] = "process"
    sandbox_workers: int = Field(default_factory=lambda: os.cpu_count() or 2, ge=1, le=256)
    sandbox_image: str = "assay-runtime:latest"
    # Loudly named on purpose: without namespaces untrusted code runs with the service's rights.
    unsafe_no_isolation: bool = False
    task_pack: Path | None = None
    retention: Literal["full", "hash_only"] = "full"
    max_body_bytes: int = 8 * 1024 * 1024
    max_response_chars: int = 100_000
    max_group_size: int = 64
    max_groups: int = 64
    max_inflight_responses: int = 1024
    retry_after_s: int = 2
    verify_threads: int = 16
    # Admin URL of a Postgres server kept for Postgres-dialect SQL tasks (throwaway schemas
    # and read-only roles are made there). Never the audit database's cluster in production.
    sql_postgres_url: str | None = None
    # Tool-state environment sessions (POST /v1/envs): idle expiry and open-session caps.
    env_ttl_s: float = Field(900.0, gt=0)
    env_max_per_key: int = Field(256, ge=1)
    env_max_sessions: int = Field(4096, ge=1)
    # Audit viewer (/ui/): how long a sign-in lasts, and how many records one export bundle may hold.
    ui_session_hours: float = Field(12.0, gt=0)
    ui_export_max_records: int = Field(20_000, ge=1)

    @property
    def verifier_services(self) -> dict[str, str]:
        """External services handed to verifiers in their VerifyContext."""
        return {"sql_postgres": self.sql_postgres_url} if self.sql_postgres_url else {}

    @cached_property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")
