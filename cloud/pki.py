"""A small certificate authority for the fleet: the cloud broker's TLS certificate and,
for mutual TLS, gateways' client certificates.

`edgewave-cloud tls-init` makes the CA and the broker's certificate; agents verify the
broker against the CA (hostname included). An operator with a CA of their own skips it
and points ``fleet.tls_*`` at their files. Keys are EC P-256, written mode 0600.
"""
from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from edgewave.shared.secret_files import write_private

CA_DAYS = 3650
LEAF_DAYS = 825


@dataclass(frozen=True)
class Issued:
    cert: Path
    key: Path


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "edgewave"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write(cert: x509.Certificate, key: ec.EllipticCurvePrivateKey, cert_path: Path, key_path: Path) -> Issued:
    cert_path.parent.mkdir(parents=True, exist_ok=True)
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    write_private(key_path, key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                              serialization.NoEncryption()))
    return Issued(cert_path, key_path)


def create_ca(cert_path: Path, key_path: Path, common_name: str = "edgewave fleet CA",
              days: int = CA_DAYS) -> Issued:
    """A self-signed CA certificate and its private key."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(_name(common_name)).issuer_name(_name(common_name))
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
    return _write(cert, key, Path(cert_path), Path(key_path))


def _load_ca(ca_cert: Path, ca_key: Path) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    cert = x509.load_pem_x509_certificate(Path(ca_cert).read_bytes())
    key = serialization.load_pem_private_key(Path(ca_key).read_bytes(), password=None)
    return cert, key  # type: ignore[return-value]


def _subject_alt_names(names: list[str]) -> x509.SubjectAlternativeName:
    entries: list[x509.GeneralName] = []
    for name in names:
        try:
            entries.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            entries.append(x509.DNSName(name))
    return x509.SubjectAlternativeName(entries)


def issue(ca_cert: Path, ca_key: Path, cert_path: Path, key_path: Path, *, common_name: str,
          server_names: list[str] | None = None, client: bool = False, days: int = LEAF_DAYS) -> Issued:
    """A leaf certificate signed by the CA: a server's (``server_names``: DNS names or IP
    addresses it is reached by) or a client's (``client=True``, for mutual TLS)."""
    ca, signer = _load_ca(ca_cert, ca_key)
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.timezone.utc)
    builder = (x509.CertificateBuilder().subject_name(_name(common_name)).issuer_name(ca.subject)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=days))
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(signer.public_key()),
                              critical=False)
               .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH if client
                                                     else ExtendedKeyUsageOID.SERVER_AUTH]), critical=False))
    if server_names:
        builder = builder.add_extension(_subject_alt_names(server_names), critical=False)
    cert = builder.sign(signer, hashes.SHA256())
    return _write(cert, key, Path(cert_path), Path(key_path))


def init_broker_tls(directory: Path, server_names: list[str]) -> dict[str, Path]:
    """A CA and the broker's certificate in ``directory``: ca.crt, ca.key, server.crt, server.key.
    An existing CA is kept (gateways already trust it); the server certificate is made anew."""
    directory = Path(directory)
    ca_cert, ca_key = directory / "ca.crt", directory / "ca.key"
    if not (ca_cert.exists() and ca_key.exists()):
        create_ca(ca_cert, ca_key)
    server = issue(ca_cert, ca_key, directory / "server.crt", directory / "server.key",
                   common_name=server_names[0], server_names=server_names)
    return {"ca": ca_cert, "ca_key": ca_key, "cert": server.cert, "key": server.key}
