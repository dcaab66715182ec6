// The visualizer's palette, in one place so the drawing and the tests that
// probe rendered pixels agree on what colour a thing must be.
//
// Every fill is opaque: a pixel at the centre of a box or on an arrow's
// shaft has exactly its colour, which is what the render tests check.
#pragma once

#include <cstdint>
#include <string>

namespace distlab::viz {

// 0xAABBGGRR, the byte order of ImU32 (IM_COL32).
using Color = uint32_t;

constexpr Color rgb(uint8_t r, uint8_t g, uint8_t b) {
  return 0xFF000000u | (uint32_t{b} << 16) | (uint32_t{g} << 8) | uint32_t{r};
}
constexpr uint8_t red_of(Color c) { return c & 0xFF; }
constexpr uint8_t green_of(Color c) { return (c >> 8) & 0xFF; }
constexpr uint8_t blue_of(Color c) { return (c >> 16) & 0xFF; }

// Behind everything: every frame is cleared to it and windows are drawn
// without a background of their own, because a software rasterizer (Mesa
// llvmpipe, headless on a CI machine) pays for every pixel a layer covers.
inline constexpr Color kCanvasColor = rgb(22, 24, 30);
inline constexpr Color kRowAltColor = rgb(34, 37, 46);      // every other row's label
inline constexpr Color kRowLineColor = rgb(38, 41, 50);     // the line between timeline rows
inline constexpr Color kGridColor = rgb(60, 64, 76);
inline constexpr Color kTextColor = rgb(225, 228, 235);
inline constexpr Color kDimTextColor = rgb(150, 155, 168);
inline constexpr Color kMergedColor = rgb(128, 132, 144);   // several sub-pixel events drawn as one
inline constexpr Color kCursorColor = rgb(255, 214, 0);     // the shared time cursor
inline constexpr Color kFlowColor = rgb(235, 235, 235);     // send -> recv arrows
inline constexpr Color kSelectedColor = rgb(255, 255, 255); // outline of the selected event
inline constexpr Color kNodeColor = rgb(52, 101, 164);      // a rank in the collectives scene
inline constexpr Color kNodeRootColor = rgb(164, 52, 120);  // the root of a broadcast or reduce
inline constexpr Color kNodeTextColor = rgb(255, 255, 255);
inline constexpr Color kEmptyCellColor = rgb(55, 58, 68);   // a chunk a rank has nothing of yet

// A fixed colour per well-known category (fwd, bwd, send, recv, collective,
// step, bucket, optimizer), any other category hashed into the palette.
Color category_color(const std::string& category);
// Chunk c of a collective: distinct hues for up to 16 chunks; -1 (the whole
// buffer) has its own colour.
Color chunk_color(int chunk);
// Mixes a with b: t = 0 gives a, t = 1 gives b.
Color mix(Color a, Color b, float t);

}  // namespace distlab::viz
