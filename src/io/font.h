// font.h — a small built-in bitmap font, so hpmc can label its plots without
// a font library.
//
// Each printable ASCII character (32..126) is a 5×8 bitmap: rows 0..6 hold
// capitals and digits (baseline under row 6), row 7 holds descenders (g, j,
// p, q, y, _). Characters advance 6 columns (one blank column between them).
// Everything is drawn at an integer `scale`: each font pixel becomes a
// scale×scale block. Bytes outside 32..126 (including UTF-8 sequences) are
// drawn as '?', one per byte.
#pragma once

#include <string>

#include "io/image.h"

namespace hpmc {

constexpr int kGlyphWidth = 5;    // inked columns per character
constexpr int kGlyphHeight = 8;   // rows per character, descender row included
constexpr int kGlyphAdvance = 6;  // columns from one character to the next

// Whether font pixel (col, row) of character `c` is inked; false outside the 5×8 cell.
bool glyph_pixel(char c, int col, int row);

// The pixel width of `s` at `scale`: from the first character's left edge to
// the last character's rightmost column (the blank column after the last
// character is not counted). 0 for an empty string.
int text_width(const std::string& s, int scale);
inline int text_height(int scale) { return kGlyphHeight * scale; }

// Draws `s` with its top-left corner at (x, y); the text occupies
// text_width(s, scale) × text_height(scale) pixels. Pixels outside the image are dropped.
void draw_text(Image& img, int x, int y, const std::string& s, int scale, Rgb color);

// Draws `s` turned 90° counter-clockwise (reading bottom to top, as a y-axis
// label): it occupies text_height(scale) × text_width(s, scale) pixels with
// its top-left corner at (x, y).
void draw_text_up(Image& img, int x, int y, const std::string& s, int scale, Rgb color);

}  // namespace hpmc
