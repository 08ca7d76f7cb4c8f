// stb_image_impl.cpp — the one translation unit that compiles the
// implementations of the single-header stb_image (decoding) and
// stb_image_resize (resampling) libraries, for io/image_decode.cpp.
//
// Only the formats hpmc reads are compiled in (PNG, JPEG, BMP), which also
// keeps the rest of stb's decoders away from untrusted files. Files are read
// by hpmc (regular files only, see core/regular_file.h) and decoded from
// memory, so stb's fopen-based loaders are left out. The failure reason is a
// thread-local in this version of stb, so images decode on every thread.
#define STB_IMAGE_IMPLEMENTATION
#define STBI_ONLY_PNG
#define STBI_ONLY_JPEG
#define STBI_ONLY_BMP
#define STBI_NO_STDIO
#define STBI_NO_LINEAR
#define STBI_NO_HDR
// A side longer than this is refused before stb allocates anything (the
// caller's pixel limit, io/image_decode.h, is the tighter check).
#define STBI_MAX_DIMENSIONS (1 << 16)
#define STB_IMAGE_RESIZE_IMPLEMENTATION

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
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wdouble-promotion"
#endif

#include <stb_image.h>
#include <stb_image_resize.h>

#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
