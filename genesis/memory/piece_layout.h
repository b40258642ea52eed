// How a range of virtual memory that is mapped at once is cut into pieces, each one
// physical allocation (mapping_pieces.h: SplitIntoPieces; VirtualMemory::MapPieces;
// AllocatorOptions::expandable_piece_size, expandable_min_piece and
// expandable_piece_layout).
#ifndef GENESIS_MEMORY_PIECE_LAYOUT_H_
#define GENESIS_MEMORY_PIECE_LAYOUT_H_

#include <cstddef>

namespace genesis::memory {

enum class PieceLayout {
  // Pieces whose sizes are powers of two (in chunks), each aligned to its own size: the
  // pieces of any two ranges line up, and a free range loses at most a piece at each
  // end when it is narrowed to whole pieces, so memory goes back closely. A range of n
  // chunks takes up to about 2 log2(n) pieces.
  kAligned,
  // As few pieces as fit: the largest allowed from the range's start on, the last one
  // what is left. About one piece per map, so mapping costs the fewest driver calls;
  // memory goes back only where a whole piece is free.
  kWhole,
};

// How one map is cut.
struct PieceCut {
  // The largest piece: a power of two of at least a chunk.
  size_t max_piece = 0;
  // kAligned: of two neighbouring pieces of one map, where one is smaller than this and
  // together they fit in max_piece, they are one piece (so a map's small end pieces
  // join the pieces next to them: fewer driver allocations, at the price of memory that
  // goes back less closely). 0 (or anything up to a chunk): the pure aligned cut.
  size_t min_piece = 0;
  PieceLayout layout = PieceLayout::kAligned;
};

}  // namespace genesis::memory

#endif  // GENESIS_MEMORY_PIECE_LAYOUT_H_
