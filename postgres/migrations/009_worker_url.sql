-- Where API servers reach a worker for synchronous requests (WORKER_URL, or its own address): null where it serves none.
ALTER TABLE workers ADD COLUMN url text;
