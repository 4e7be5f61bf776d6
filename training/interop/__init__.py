"""Other toolkits' model formats: Hugging Face Marian / OPUS-MT directories in and out (docs/interop.md)."""
