#ifndef HLSCACHE_CLIBSSL_SHIM_H
#define HLSCACHE_CLIBSSL_SHIM_H

#include <openssl/evp.h>
#include <openssl/sha.h>
#include <openssl/rand.h>
#include <openssl/err.h>
#include <openssl/hmac.h>

#endif
