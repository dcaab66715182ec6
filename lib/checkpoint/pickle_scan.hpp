// A walk over a torch.save file's pickle before LibTorch's unpickler reads
// it, refusing what the unpickler would trust.
//
// LibTorch 1.13's unpickler (torch::jit::pickle_load) believes every length
// a pickle claims: a string's length is allocated and filled before its
// bytes are read (4 GB from a 2 kB file), a memo index past the memo
// grows the memo to it, and a storage's element count becomes the storage's
// size whatever the bytes of its record. A checkpoint that passes its CRC-32
// reaches that unpickler only when it was made to, yet a reader of outside
// bytes refuses bad bytes with a message: this walk checks, opcode by
// opcode, what torch.save writes (protocol 2: dicts, tuples, strings,
// ints, floats, booleans, globals, persistent storages, the memo), and
// refuses every claim that goes past the bytes there are and every opcode
// torch.save does not write.
//
// The zip around the pickle is read through a reader that never reads past
// the file's end (LibTorch's in-memory reader copies whatever it is asked
// for: a zip whose directory points past its end made it read freed
// memory), so such a zip is refused here, before pickle_load reads it.
#pragma once

#include <string>
#include <vector>

namespace distlab::checkpoint {

// "" when `file` (a torch.save zip) is one LibTorch's unpickler may read;
// else why not, in one line: "a string at byte 42 of data.pkl claims
// 4294967291 bytes, past the 1930 there are".
std::string pickle_problem(const std::vector<char>& file);

}  // namespace distlab::checkpoint
