"""What one text's heads do: roles, the display's maps, contributions, induction, the query-key view, sentence pairs."""
