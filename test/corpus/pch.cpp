// The translation unit that builds the corpus programs' shared precompiled header.
