"""Adapters for the trainers people use: TRL `reward_funcs`, verl `compute_score`.

OpenRLHF needs no client code: point `--remote_rm_url` at the service's `/v1/openrlhf`.
"""
