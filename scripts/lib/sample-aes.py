#!/usr/bin/env python3
"""Encrypts an H.264 Annex B elementary stream with HLS SAMPLE-AES (Apple's "HLS Sample Encryption", video): in
every coded slice NAL unit (types 1 and 5) longer than 48 bytes, without its emulation prevention bytes, the
first 32 bytes stay clear, then one 16-byte block in ten is encrypted (AES-128-CBC, the IV restarting at each NAL
unit, the chain running through the unit's encrypted blocks; a last block of 16 bytes or fewer stays clear), and
emulation prevention bytes are inserted again. The result is muxed into MPEG-TS by ffmpeg (`-c copy`), whose HLS
demuxer decrypts it (libavformat/hls_sample_encryption.c).

usage: sample-aes.py IN.h264 OUT.h264 KEYFILE IVHEX
Exit 0; prints the number of NAL units encrypted. Needs the `cryptography` module.
"""
import sys
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes


def split_nal_units(data):
    """(start code, NAL unit) pairs of an Annex B stream."""
    units = []
    i, n = 0, len(data)
    starts = []
    while i + 3 <= n:
        if data[i] == 0 and data[i + 1] == 0 and data[i + 2] == 1:
            code = 4 if i > 0 and data[i - 1] == 0 else 3
            starts.append((i - (code - 3), code))
            i += 3
        else:
            i += 1
    for index, (start, code) in enumerate(starts):
        end = starts[index + 1][0] if index + 1 < len(starts) else n
        units.append((data[start:start + code], data[start + code:end]))
    return units


def remove_epb(nal):
    """What ffmpeg's remove_scep_3_bytes does: drop the 0x03 of every 00 00 03 with more than 3 bytes from it on."""
    out = bytearray()
    i = 0
    while i < len(nal):
        if len(nal) - i > 3 and nal[i] == 0 and nal[i + 1] == 0 and nal[i + 2] == 3:
            out += nal[i:i + 2]
            i += 3
        else:
            out.append(nal[i])
            i += 1
    return bytes(out)


def insert_epb(rbsp):
    out = bytearray()
    zeros = 0
    for byte in rbsp:
        if zeros >= 2 and byte <= 3:
            out.append(3)
            zeros = 0
        out.append(byte)
        zeros = zeros + 1 if byte == 0 else 0
    return bytes(out)


def encrypt_unit(rbsp, key, iv):
    block = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
    data = bytearray(rbsp)
    chain = iv
    position, remaining = 32, len(data) - 32
    while remaining > 0:
        if remaining > 16:
            plain = bytes(a ^ b for a, b in zip(data[position:position + 16], chain))
            chain = block.update(plain)
            data[position:position + 16] = chain
            position += 16
            remaining -= 16
        skip = min(144, remaining)
        position += skip
        remaining -= skip
    return bytes(data)


def main():
    source, target, keyfile, ivhex = sys.argv[1:5]
    key = open(keyfile, "rb").read()
    iv = bytes.fromhex(ivhex)
    assert len(key) == 16 and len(iv) == 16
    data = open(source, "rb").read()
    out = bytearray()
    encrypted = 0
    for code, nal in split_nal_units(data):
        kind = nal[0] & 0x1F if nal else 0
        rbsp = remove_epb(nal)
        if kind in (1, 5) and len(rbsp) > 48:
            sealed = encrypt_unit(rbsp, key, iv)
            escaped = insert_epb(sealed)
            if escaped[-1] == 0:
                escaped += b"\x03"
            # The decrypting side must find exactly the encrypted bytes again once it drops the escapes.
            if remove_epb(escaped)[: len(sealed)] != sealed:
                sys.exit(f"a NAL unit does not survive escaping with this IV ({ivhex}); pick another")
            out += code + escaped
            encrypted += 1
        else:
            out += code + nal
    open(target, "wb").write(bytes(out))
    print(encrypted)


if __name__ == "__main__":
    main()
