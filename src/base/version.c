/* rlx_version: the version the library was built as (from rlx.h), so a
 * program can tell which librlx.so it runs against. */
#include "rlx.h"

const char* rlx_version(void) { return RLX_VERSION_STRING; }
