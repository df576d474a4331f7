"""Delegation tokens (KIP-48) on the secured pair (secured.py: SASL/SCRAM-SHA-256, an ACL authorizer and
a token secret on both), with kafka-delegation-tokens.sh and a login over a token.

Token ids and HMACs are random per broker, and the tool prints dates at the minute: the scenario registers
each token's id and HMAC with the normalizer and writes dates as `<date>`, with the lifetimes the dates
imply (expiry and max date minus the issue date, in minutes) written out instead.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from datetime import datetime
from pathlib import Path

from framework import Context, scenario
from secured import password

TOOL = "kafka-delegation-tokens"
DATE_RE = re.compile(r"\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}\b")
OWNER, RENEWER, STRANGER = "acl_write", "acl_read", "acl_nobody"


def command_config(directory: Path, name: str, username: str, secret: str, token: bool = False) -> Path:
    path = directory / f"{name}.properties"
    extension = ' tokenauth="true"' if token else ""
    path.write_text(
        "security.protocol=SASL_PLAINTEXT\n"
        "sasl.mechanism=SCRAM-SHA-256\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{username}" password="{secret}"{extension};\n'
    )
    return path


class Tokens:
    def __init__(self, ctx: Context, directory: Path):
        self.ctx = ctx
        self.directory = directory
        ctx.norm.register(str(directory), "<dir>")

    def as_user(self, user: str) -> Path:
        return command_config(self.directory, user, user, password(user))

    def run(self, config: Path, *args: str) -> list[str]:
        """Runs the tool, writes its answer with dates as <date>; returns stdout's lines as printed."""
        run = self.ctx.run_tool(TOOL, "--command-config", str(config), *args)
        self.write(config, args, run.stdout, run.stderr, run.returncode)
        return run.stdout

    def write(self, config: Path, args: tuple[str, ...], stdout: list[str], stderr: list[str],
              returncode: int | None) -> None:
        self.ctx.out(f"$ {TOOL} --command-config {config} {' '.join(args)}")
        for text in stdout:
            self.ctx.out("  " + DATE_RE.sub("<date>", text))
        for text in stderr:
            self.ctx.out("  stderr: " + DATE_RE.sub("<date>", text))
        if returncode != 0:
            self.ctx.out(f"  exit {returncode}")

    def lifetimes(self, lines: list[str], token_id: str) -> None:
        """The expiry and max dates of the token's row, as minutes after its issue date."""
        row = next((line for line in lines if line.startswith(token_id)), "")
        dates = [datetime.strptime(d, "%Y-%m-%dT%H:%M") for d in DATE_RE.findall(row)]
        if len(dates) != 3:
            self.ctx.out(f"  no dates in the token's row: {row!r}")
            return
        issued, expiry, max_date = dates
        minutes = lambda d: round((d - issued).total_seconds() / 60)  # noqa: E731
        self.ctx.out(f"  lifetimes: expiry = issue + {minutes(expiry)} min, max = issue + {minutes(max_date)} min")


@scenario(secured=True)
def scenario_delegation_tokens(ctx: Context) -> None:
    """A user creates a token naming a renewer; owner, renewer and a stranger describe it; the renewer renews,
    the stranger may not; a login over the token is the owner, and may not ask for tokens itself; the owner
    expires it, after which it is gone and no longer logs in; a token for another owner needs CREATE_TOKENS."""
    directory = Path(tempfile.mkdtemp(prefix="cf-tokens-"))
    try:
        tokens = Tokens(ctx, directory)
        owner, renewer, stranger = (tokens.as_user(u) for u in (OWNER, RENEWER, STRANGER))
        create = ("--create", "--max-life-time-period", "-1", "--renewer-principal", f"User:{RENEWER}")
        # The token's id and HMAC are registered before its answer is written.
        created = ctx.run_tool(TOOL, "--command-config", str(owner), *create).stdout
        token_id = next((m.group(1) for line in created
                         for m in [re.search(r"tokenId\s*:\s*'?([A-Za-z0-9_+/=-]+)'?", line)] if m), None)
        row = next((line.split() for line in created if token_id and line.startswith(token_id)), [])
        hmac = row[1] if len(row) > 1 else ""
        if token_id:
            ctx.norm.register(token_id, "<token-id>")
        if hmac:
            ctx.norm.register(hmac, "<hmac>")
        tokens.write(owner, create, created, [], 0)
        ctx.out("token id and HMAC found:", bool(token_id and hmac))
        if not (token_id and hmac):
            return
        tokens.lifetimes(created, token_id)

        # Without --owner-principal the tool asks for an empty owner list, which Kafka answers with none.
        tokens.run(owner, "--describe")
        for config in (owner, renewer, stranger):
            tokens.run(config, "--describe", "--owner-principal", f"User:{OWNER}")
        tokens.run(stranger, "--renew", "--hmac", hmac, "--renew-time-period", "3600000")
        renewed = tokens.run(renewer, "--renew", "--hmac", hmac, "--renew-time-period", "3600000")
        ctx.out("renewed:", any("renew" in line.lower() for line in renewed))

        over_token = command_config(directory, "token", token_id, hmac, token=True)
        tokens.run(over_token, "--describe")
        tokens.run(over_token, "--create", "--max-life-time-period", "-1")

        tokens.run(owner, "--expire", "--hmac", hmac, "--expiry-time-period", "-1")
        tokens.run(owner, "--describe", "--owner-principal", f"User:{OWNER}")
        tokens.run(over_token, "--describe")
        # On behalf of another owner (v3's owner principal): CREATE_TOKENS on that user is needed.
        tokens.run(owner, "--create", "--max-life-time-period", "-1", "--owner-principal", f"User:{RENEWER}")
    finally:
        shutil.rmtree(directory, ignore_errors=True)
