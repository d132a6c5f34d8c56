"""HTTP routes. Every module here that exports `router` is included by the app."""
