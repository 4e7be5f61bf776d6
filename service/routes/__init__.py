"""One router per part of the API."""
