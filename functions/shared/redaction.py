"""What may be written where a person or a log reader sees it: no customer data.

Errors come back from AWS and from sinks carrying what they were given: SES refusing a send
in its sandbox names the recipient's address; an HTTP client's error can carry the URL it
was given, credentials and query included. Every error that is logged, stored (an outbox
item's `last_error`, a dead letter's reason) or printed goes through `redacted` first; the
functions' log lines go through it as a whole (functions/shared/observability.py).
"""

from __future__ import annotations

import re
from typing import Final

from botocore.exceptions import ClientError

# An e-mail address, loosely (RFC 5322's dot-atom local part): better one false positive in
# a log line than an address kept.
EMAIL: Final = re.compile(r"[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+")
# scheme://[userinfo@]rest: the userinfo, and the query and fragment after the path.
URL: Final = re.compile(
    r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^\s/@'\"<>]*@)?"
    r"(?P<where>[^\s?#'\"<>]*)(?P<rest>[?#][^\s'\"<>]*)?"
)
EMAIL_MARK: Final = "[email]"
USERINFO_MARK: Final = "[redacted]@"
QUERY_MARK: Final = "?[redacted]"
MAX_ERROR_CHARACTERS: Final = 500


def redacted(text: str) -> str:
    """`text` with e-mail addresses, and URLs' userinfo, query and fragment, replaced."""
    return EMAIL.sub(EMAIL_MARK, URL.sub(_url, text))


def _url(match: re.Match[str]) -> str:
    return (
        match["scheme"]
        + (USERINFO_MARK if match["userinfo"] else "")
        + match["where"]
        + (QUERY_MARK if match["rest"] else "")
    )


def error_text(error: BaseException) -> str:
    """An error as it may be stored and logged: its code (an AWS error code, or its type),
    then its message redacted, at most MAX_ERROR_CHARACTERS."""
    if isinstance(error, ClientError):
        details = error.response.get("Error", {})
        code, message = details.get("Code", "ClientError"), details.get("Message", "")
    else:
        code, message = type(error).__name__, str(error)
    return f"{code}: {redacted(message)}"[:MAX_ERROR_CHARACTERS] if message else code
