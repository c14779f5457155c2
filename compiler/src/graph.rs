//! DOT graph of clocks, regions and callables. (In progress.)
