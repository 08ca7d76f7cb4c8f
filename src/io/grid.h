// grid.h — reconstruction grids: input images above their reconstructions,
// in one RGB picture for a quick look at what an autoencoder learned.
//
// Layout with C = min(cols, count) columns and R = ceil(count / C) rows of
// inputs. Each cell is one image upscaled by `scale` (nearest neighbour):
// cw = width*scale by ch = height*scale pixels. Cells are separated, and the
// picture is bordered, by kGridPad pixels of background (mid-grey 128).
// With reconstructions, each row of inputs has the row of their
// reconstructions directly below it (kGridPad apart), and successive pairs of
// rows are kGridPairGap apart. The output is exactly
//
//   out_width  = C*cw + (C+1)*kGridPad
//   out_height = R*(2*ch + kGridPad) + (R-1)*kGridPairGap + 2*kGridPad   (bottom != null)
//   out_height = R*ch + (R+1)*kGridPad                                  (bottom == null)
//
// Image i (0-based) sits in row i / C, column i % C; its top-left pixel is at
//   x = kGridPad + (i % C)*(cw + kGridPad)
//   y = kGridPad + (i / C)*(2*ch + kGridPad + kGridPairGap)   (bottom != null)
//   y = kGridPad + (i / C)*(ch + kGridPad)                    (bottom == null)
// and its reconstruction's at (x, y + ch + kGridPad).
// Unused cells of the last row stay background.
#pragma once

#include "io/image.h"

namespace hpmc {

constexpr int kGridPad = 2;      // separator between images, and the border
constexpr int kGridPairGap = 6;  // between one input/reconstruction pair of rows and the next
constexpr Rgb kGridBackground{128, 128, 128};
constexpr Rgb kGridNaN{255, 0, 255};  // magenta: a NaN anywhere in a pixel

// `top` and `bottom` hold `count` NCHW float images (channels 1 or 3) with
// values in [0, 1]; values are clamped (±inf included) and a pixel with a NaN
// in any channel is drawn magenta. 1-channel images come out grey; 3-channel
// ones as RGB with channel 0 red. `bottom` may be null: one row set, inputs
// only. Returns an RGB image of the size documented above; throws
// RuntimeError for count < 1, other channel counts, non-positive sizes, scale
// or cols, or an output too large to be a sensible PNG (over 2^15 pixels a side).
Image image_grid(const float* top, const float* bottom, int count, int channels, int height,
                 int width, int scale, int cols);

}  // namespace hpmc
