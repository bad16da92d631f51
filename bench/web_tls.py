"""A throw-away certificate authority for serving the benchmark web over HTTPS.

:func:`issue_web_certificate` makes a CA at run time (``trustme``, in the
project's dev extra), issues one certificate for ``*.bench.test`` (every host of
the web) and writes three PEM files into a folder: the CA's certificate (what
both crawlers are told to trust: courtier's ``--ca-file``, the Scrapy peer's
``--ca-file``), and nginx's certificate chain and private key. Nothing is kept:
each run has its own CA, so no test certificate outlives the run.
"""

from __future__ import annotations

from pathlib import Path

from nginx_local import TlsFiles

WILDCARD = "*.bench.test"


def issue_web_certificate(folder: Path) -> tuple[Path, TlsFiles]:
    """A new CA and a ``*.bench.test`` certificate it signs; returns the CA's PEM path
    and the files nginx serves with."""
    import trustme  # dev extra; only the HTTPS form of the benchmark needs it

    folder.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA(organization_name="courtier bench CA")
    cert = ca.issue_cert(WILDCARD)
    ca_pem, chain, key = folder / "ca.pem", folder / "server-chain.pem", folder / "server.key"
    ca.cert_pem.write_to_path(str(ca_pem))
    cert.private_key_pem.write_to_path(str(key))
    with chain.open("wb") as out:
        for blob in cert.cert_chain_pems:
            out.write(blob.bytes())
    return ca_pem, TlsFiles(chain, key)
