#!/bin/sh
# tests/lib/mbaps-certs.sh DIR -- a small PKI for MB-TCP-Security, made with the
# openssl command line only: the commands docs/security.md shows, run by
# tests/e2e/security/test_mbaps.py and `rtugw bench tls`.
#
# In DIR: ca.pem/ca.key (the CA rtugw's ca_file names), server.pem/.key
# (subjectAltName IP:127.0.0.1 and localhost), and client certificates:
#   reader, operator, admin, unit1,    role extension
#   stranger (OID
#                                      1.3.6.1.4.1.50316.802.1, UTF8String)
#                                      naming that role
#   norole                             no role extension
#   expired                            role operator, valid only in January 2020
#   revoked                            role operator, revoked in crl.pem
#   foreign                            role operator, issued by other-ca.pem
# and server-next.pem/.key, a second server certificate (CN server-next,
# valid 20 days: inside the 30-day warning) for the reload test.
# Keys are ECDSA P-256. Cheap to run again: DIR is made afresh.
set -eu
dir=${1:?usage: mbaps-certs.sh DIR}
rm -rf "$dir"
mkdir -p "$dir/newcerts"
cd "$dir"

cat >ca.cnf <<'EOF'
# The CA's database, and the extensions each kind of certificate gets.
[ ca ]
default_ca = rtugw_ca

[ rtugw_ca ]
dir = .
certificate = $dir/ca.pem
private_key = $dir/ca.key
database = $dir/index.txt
new_certs_dir = $dir/newcerts
serial = $dir/serial
crlnumber = $dir/crlnumber
default_md = sha256
default_days = 365
default_crl_days = 30
policy = policy_any
unique_subject = no

[ policy_any ]
commonName = supplied

[ req ]
distinguished_name = dn
prompt = no

[ dn ]
CN = unused

[ v3_ca ]
basicConstraints = critical, CA:true
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash

[ server ]
basicConstraints = critical, CA:false
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1, DNS:localhost

[ client ]
basicConstraints = critical, CA:false
keyUsage = critical, digitalSignature
extendedKeyUsage = clientAuth

# The MB-TCP-Security role: a non-critical extension, one UTF8String.
[ client_role ]
basicConstraints = critical, CA:false
keyUsage = critical, digitalSignature
extendedKeyUsage = clientAuth
1.3.6.1.4.1.50316.802.1 = ASN1:UTF8String:${ENV::RTUGW_ROLE}
EOF
: >index.txt
echo 01 >serial
echo 01 >crlnumber
# ca.cnf reads RTUGW_ROLE whatever the command; it matters only for client_role.
RTUGW_ROLE=${RTUGW_ROLE:-none}
export RTUGW_ROLE

key() {
    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1.key" 2>/dev/null
}

# issue NAME EXTENSIONS [openssl ca options]: a key, a request, the CA's signature.
issue() {
    name=$1 ext=$2
    shift 2
    key "$name"
    openssl req -new -config ca.cnf -key "$name.key" -subj "/CN=$name" -out "$name.csr"
    openssl ca -batch -notext -config ca.cnf -extensions "$ext" -in "$name.csr" -out "$name.pem" "$@" 2>/dev/null
}

key ca
openssl req -new -x509 -config ca.cnf -extensions v3_ca -key ca.key -subj "/CN=rtugw test CA" -days 3650 -out ca.pem

issue server server -days 365
issue server-next server -days 20
for role in reader operator admin unit1 stranger; do
    RTUGW_ROLE=$role issue "$role" client_role -days 365
done
issue norole client -days 365
RTUGW_ROLE=operator issue expired client_role -startdate 20200101000000Z -enddate 20200201000000Z
RTUGW_ROLE=operator issue revoked client_role -days 365
openssl ca -config ca.cnf -revoke revoked.pem 2>/dev/null
openssl ca -config ca.cnf -gencrl -out crl.pem 2>/dev/null

# Another CA, one this gateway does not trust, and a client it signed.
key other-ca
openssl req -new -x509 -config ca.cnf -extensions v3_ca -key other-ca.key -subj "/CN=another CA" -days 3650 \
    -out other-ca.pem
key foreign
openssl req -new -config ca.cnf -key foreign.key -subj "/CN=foreign" -out foreign.csr
RTUGW_ROLE=operator openssl x509 -req -in foreign.csr -CA other-ca.pem -CAkey other-ca.key -CAcreateserial \
    -days 365 -sha256 -extfile ca.cnf -extensions client_role -out foreign.pem 2>/dev/null
