// reference.h — the layer, loss, optimizer and schedule reference, printed from the registry's
// schemas (layers/schema.h): as text for `hpmc info`, and as the Markdown of
// README.md's "Layer reference" section (`hpmc info --reference`; a test
// checks that the README holds exactly this text).
#pragma once

#include <iosfwd>

namespace hpmc {

// Every layer type with its keys (type, default, doc) and every loss.
void print_reference_text(std::ostream& out, const char* indent);
// The same as Markdown tables.
void print_reference_markdown(std::ostream& out);

}  // namespace hpmc
