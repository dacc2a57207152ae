/* UTF-8 and Unicode classes for the pre-tokenizers (see tokenizer.h).
 *
 * The classes come from ICU's libicuuc (Debian libicu-dev; ICU 72 carries
 * Unicode 15.0): the general category for letters (L*), numbers (N*) and
 * punctuation (P*), and the White_Space property for \s, which is what the
 * Hugging Face tokenizers' regex engine uses for these classes. A Debian
 * library was chosen over generated tables so no table has to be kept in
 * step with new Unicode versions. Built without ICU (RLX_HAVE_ICU unset),
 * uni_available() is 0 and the BPE tokenizers refuse to load. */
#include "io/tokenizer.h"

#include <stdlib.h>

#ifdef RLX_HAVE_ICU
#include <unicode/uchar.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>
#endif

int utf8_decode(const unsigned char* s, size_t n, uint32_t* cp) {
  unsigned c = s[0];
  int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  if (len == 0 || (size_t)len > n) {
    *cp = 0xFFFD;
    return 1;
  }
  uint32_t v = len == 1 ? c : c & (0x7Fu >> len);
  for (int i = 1; i < len; i++) {
    if ((s[i] & 0xC0) != 0x80) {
      *cp = 0xFFFD;
      return 1;
    }
    v = (v << 6) | (s[i] & 0x3F);
  }
  *cp = v;
  return len;
}

int utf8_encode(uint32_t cp, char* out) {
  if (cp < 0x80) {
    out[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    out[0] = (char)(0xC0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = (char)(0xE0 | (cp >> 12));
    out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = (char)(0xF0 | (cp >> 18));
  out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
  out[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

#ifdef RLX_HAVE_ICU
int uni_available(void) { return 1; }

int uni_is_letter(uint32_t cp) { return (U_GET_GC_MASK((UChar32)cp) & U_GC_L_MASK) != 0; }
int uni_is_number(uint32_t cp) { return (U_GET_GC_MASK((UChar32)cp) & U_GC_N_MASK) != 0; }
int uni_is_punct(uint32_t cp) { return (U_GET_GC_MASK((UChar32)cp) & U_GC_P_MASK) != 0; }
int uni_is_space(uint32_t cp) { return u_isUWhiteSpace((UChar32)cp) != 0; }
int uni_is_cased_letter(uint32_t cp) { return (U_GET_GC_MASK((UChar32)cp) & U_GC_LC_MASK) != 0; }

/* UTF-8 -> UTF-16 (ICU's normalizer works on UTF-16) -> NFC -> UTF-8. */
rlx_status uni_nfc(const char* s, size_t n, char** out, size_t* out_n, rlx_error* err) {
  UErrorCode e = U_ZERO_ERROR;
  const UNormalizer2* nfc = unorm2_getNFCInstance(&e);
  int32_t n16 = 0, m16 = 0, n8 = 0;
  *out = NULL;
  if (U_FAILURE(e) || n > INT32_MAX / 4) return RLX_OK; /* no data: text as it is */
  UChar* src = malloc(n * sizeof(UChar) + 2);
  RLX_CHECK_ALLOC(err, src);
  u_strFromUTF8(src, (int32_t)n + 1, &n16, s, (int32_t)n, &e);
  if (U_FAILURE(e) || unorm2_isNormalized(nfc, src, n16, &e) || U_FAILURE(e)) {
    free(src); /* invalid UTF-8 or already NFC */
    return RLX_OK;
  }
  UChar* dst = malloc((size_t)(3 * n16 + 1) * sizeof(UChar)); /* NFC grows at most 3x */
  char* utf8 = malloc(9 * (size_t)n16 + 1);
  if (dst && utf8) m16 = unorm2_normalize(nfc, src, n16, dst, 3 * n16 + 1, &e);
  if (dst && utf8 && U_SUCCESS(e)) u_strToUTF8(utf8, 9 * n16 + 1, &n8, dst, m16, &e);
  free(src);
  free(dst);
  if (!utf8 || U_FAILURE(e)) {
    free(utf8);
    return utf8 ? RLX_OK : rlx_fail(err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
  }
  utf8[n8] = 0;
  *out = utf8;
  *out_n = (size_t)n8;
  return RLX_OK;
}
#else
rlx_status uni_nfc(const char* s, size_t n, char** out, size_t* out_n, rlx_error* err) {
  (void)s, (void)n, (void)out_n;
  *out = NULL;
  return rlx_fail(err, RLX_UNIMPLEMENTED, "tokenizer: NFC needs ICU (libicu-dev)");
}

int uni_available(void) { return 0; }

/* ASCII only: enough for SentencePiece (which needs no classes). */
int uni_is_letter(uint32_t cp) { return (cp | 32) - 'a' < 26; }
int uni_is_number(uint32_t cp) { return cp - '0' < 10; }
int uni_is_punct(uint32_t cp) { return cp < 128 && cp > 32 && !uni_is_letter(cp) && !uni_is_number(cp); }
int uni_is_space(uint32_t cp) { return cp == ' ' || (cp >= 9 && cp <= 13); }
int uni_is_cased_letter(uint32_t cp) { return uni_is_letter(cp); }
#endif
