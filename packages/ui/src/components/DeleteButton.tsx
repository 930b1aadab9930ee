import { useState } from 'react';

/** Delete in two steps (no window.confirm): the first click asks, the second deletes. */
export function DeleteButton({ name, onDelete }: { name: string; onDelete: () => void }) {
  const [asking, setAsking] = useState(false);
  return asking ? (
    <>
      <button type="button" className="danger" onClick={onDelete}>
        Delete {name} for good
      </button>
      <button type="button" onClick={() => setAsking(false)}>
        Keep
      </button>
    </>
  ) : (
    <button type="button" onClick={() => setAsking(true)}>
      Delete
    </button>
  );
}
