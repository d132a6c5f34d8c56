"""Math answer verification: extraction (host), safe parsing and comparison (sandbox)."""
