// stb_image_write_impl.cpp — the one translation unit that compiles the
// implementation of the single-header stb_image_write library.
//
// hpmc only encodes into memory (stbi_write_png_to_func) and writes the bytes
// itself through AtomicFile, so stb's own fopen-based writers are left out:
// a stray call to one of them fails to link instead of writing non-atomically.
// The pragmas keep -Wall -Wextra quiet about third-party code we do not own.
#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STBI_WRITE_NO_STDIO

#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wall"
#pragma GCC diagnostic ignored "-Wextra"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#pragma GCC diagnostic ignored "-Wtype-limits"
#endif

#include <stb_image_write.h>

#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
