"""Config loading: the kvunits format, the Hugging Face adapter, hostile input."""
